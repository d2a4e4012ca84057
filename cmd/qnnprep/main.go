// Command qnnprep prepares large language models for Qualcomm NPUs (Hexagon
// HTP) and proves, by decoding, that what it built is still the model.
//
// Each subcommand lives in its own file as a command value and a named
// function that parses its flags and calls into the packages; this file
// holds the command table, dispatches, prints help and handles interrupts.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/internal/mmapfile"
)

// command is one subcommand. Run gets the command itself (for its flag
// set's help, see newFlags) and the arguments after the subcommand name.
// Passing c rather than closing over it keeps each command a plain named
// function without an initialization cycle.
type command struct {
	Name    string
	Usage   string // one line: "qnnprep inspect PATH [--json]"
	Summary string // one line shown in the command list
	Run     func(ctx context.Context, c *command, args []string) error
}

// commands is every subcommand, in the order help lists them.
var commands = []*command{
	benchCmd,
	buildCmd,
	bundleCmd,
	checkCmd,
	ciCmd,
	compareCmd,
	convertCmd,
	demoCmd,
	estimateCmd,
	exportCmd,
	goldenCmd,
	inspectCmd,
	planCmd,
	quantizeCmd,
	runCmd,
	sdkCmd,
	sparsifyCmd,
	speculateCmd,
	verifyCmd,
	versionCmd,
}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for _, c := range commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// errUsage marks an error the user fixes by reading --help; main prints
// the usage line after it and exits 2.
var errUsage = errors.New("usage")

// printJSON prints v on stdout as indented JSON (the --json output).
func printJSON(v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Println(string(b))
}

// usageError returns an error wrapping errUsage with a message.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errUsage)
}

// exitError carries a specific exit code (e.g. 1 for "check found
// violations") without an extra message.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// newFlags returns a flag set for c whose --help prints the usage line,
// the summary and the flags.
func newFlags(c *command) *pflag.FlagSet {
	fs := pflag.NewFlagSet(c.Name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s\n\n%s\n", c.Usage, c.Summary)
		if fs.HasFlags() {
			fmt.Fprintf(w, "\nflags:\n%s", fs.FlagUsages())
		}
	}
	return fs
}

// flagSets, when set (by flags_test.go), receives each flag set a command
// would parse; parseFlags then returns errFlagsCollected instead of
// parsing, so a command's flags can be listed without running it.
var flagSets func(*pflag.FlagSet)

var errFlagsCollected = errors.New("flags collected")

// parseFlags parses args, turning --help into a clean exit and flag
// errors into usage errors.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if flagSets != nil {
		flagSets(fs)
		return errFlagsCollected
	}
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitError{0}
		}
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	if err := checkThreads(fs); err != nil {
		return err
	}
	return checkContext(fs)
}

func printCommands(w io.Writer) {
	fmt.Fprintf(w, "qnnprep prepares LLMs for Qualcomm NPUs and verifies them by decoding.\n\nusage: qnnprep COMMAND [flags] [args]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(w, "\nRun 'qnnprep COMMAND --help' for a command's flags.\n")
}

func main() {
	// Package initialization (every linked package's, whatever the command)
	// and a decoding command's start-up (model metadata, tokenizer) touch
	// about 10 MB of the binary and leave free heap; they are given back
	// once, when the weights come in, which sets the peak. Releasing them
	// here as well cost 30-50 ms before the first token (MADV_PAGEOUT of the
	// executable, then its pages faulted back) and lowered no peak: 700M
	// Q1_0 run -t 2, 4 interleaved rounds on the EPYC, 0.12-0.36 s and
	// 104.1-104.3 MB with it, 0.09 s and 102.6-103.0 MB without.
	mmapfile.SettleBeforePopulate()
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 2 && args[0] == "help" {
			args = []string{args[1], "--help"}
		} else {
			printCommands(os.Stdout)
			if len(args) == 0 {
				return 2
			}
			return 0
		}
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(os.Stderr, "qnnprep: unknown command %q\n\n", args[0])
		printCommands(os.Stderr)
		return 2
	}

	ctx, stop := interruptContext(c.Name)
	defer stop()
	err := c.Run(ctx, c, args[1:])
	// Whatever happened, no temporary file may outlive the command.
	atomicfile.RemoveTemps()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case ctx.Err() != nil:
		interrupted(c.Name)
		return 130
	case errors.Is(err, errUsage):
		fmt.Fprintf(os.Stderr, "qnnprep %s: %s\nusage: %s\n", c.Name, strings.TrimSuffix(err.Error(), ": usage"), c.Usage)
		return 2
	default:
		fmt.Fprintf(os.Stderr, "qnnprep %s: %v\n", c.Name, err)
		return 1
	}
}

// interruptGrace is how long a command may take to unwind after SIGINT or
// SIGTERM before the process removes its temporary files and exits anyway:
// an interrupted command must stop within a second, whatever it was doing.
const interruptGrace = 800 * time.Millisecond

var interruptOnce sync.Once

// interrupted tells the user, once, that the command was interrupted.
func interrupted(name string) {
	interruptOnce.Do(func() { fmt.Fprintf(os.Stderr, "qnnprep %s: interrupted\n", name) })
}

// interruptContext is cancelled on SIGINT or SIGTERM. Commands watch it and
// unwind (killing child processes, aborting temp files); if they have not
// returned within interruptGrace, or a second signal arrives, temporary
// files are removed and the process exits at once with status 130.
func interruptContext(name string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sig; !ok {
			return
		}
		cancel()
		select {
		case <-sig:
		case <-time.After(interruptGrace):
		}
		atomicfile.RemoveTemps()
		interrupted(name)
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(sig); cancel() }
}
