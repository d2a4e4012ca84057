package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/pipeline"
)

// interrupted is what a child qnnprep did after SIGINT.
type interruptResult struct {
	latency time.Duration // SIGINT to exit
	code    int
	stderr  string
}

// interruptWhen runs qnnprep with args in a child process, sends SIGINT
// once ready reports true (polled every 2 ms for up to two minutes) and
// waits for the exit.
func interruptWhen(t *testing.T, args []string, ready func() bool) interruptResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperQnnprep$")
	argsJSON, _ := json.Marshal(args)
	cmd.Env = append(os.Environ(), "QNNPREP_HELPER_ARGS="+string(argsJSON))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(2 * time.Minute)
	for !ready() {
		select {
		case <-exited:
			t.Fatalf("%v finished before it could be interrupted (exit %d); stderr:\n%s", args, cmd.ProcessState.ExitCode(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("%v: never ready to interrupt; stderr:\n%s", args, stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("%v did not exit after SIGINT", args)
	}
	return interruptResult{time.Since(sent), cmd.ProcessState.ExitCode(), stderr.String()}
}

// check requires what every interrupted command owes the user: exit
// within a second, status 130 and "interrupted" on stderr.
func (r interruptResult) check(t *testing.T, name string) {
	t.Helper()
	t.Logf("%s: SIGINT to exit %v", name, r.latency.Round(time.Millisecond))
	if r.latency > time.Second {
		t.Errorf("%s took %v to stop after SIGINT, want at most 1s", name, r.latency)
	}
	if r.code != 130 {
		t.Errorf("%s: exit %d, want 130; stderr:\n%s", name, r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "interrupted") {
		t.Errorf("%s: stderr does not say interrupted:\n%s", name, r.stderr)
	}
}

// findTemp reports whether a temporary file with data in it exists under
// dir whose name contains part.
func findTemp(dir, part string) bool {
	found := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && atomicfile.IsTemp(d.Name()) && strings.Contains(d.Name(), part) {
			if fi, err := d.Info(); err == nil && fi.Size() > 0 {
				found = true
			}
		}
		return nil
	})
	return found
}

// TestBuildInterruptedMidStep interrupts 'build' while it writes the
// qmodel and while it writes a stage's ONNX weights: it stops within a
// second, exits 130, says so, and what it leaves under final names is
// complete (a qmodel that opens, models with their encodings and data).
func TestBuildInterruptedMidStep(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 300 MB model")
	}
	src := writeBigLlama(t, t.TempDir(), 2)
	for _, tc := range []struct{ step, temp string }{
		{pipeline.StepQuantize, pipeline.QModelName},
		{pipeline.StepExport, ".data"},
	} {
		t.Run(tc.step, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			r := interruptWhen(t, []string{"build", src, out, "--recipe", "int8", "--stages", "1", "--ar", "32,1", "--cl", "128",
				"--calibrate", "0", "--no-verify", "--dry-run", "-q"},
				func() bool { return findTemp(out, tc.temp) })
			r.check(t, "build during "+tc.step)
			filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return nil
				}
				name := d.Name()
				switch {
				case atomicfile.IsTemp(name):
					t.Errorf("interrupted build left %s", p)
				case name == pipeline.QModelName:
					m, err := model.Open(p)
					if err != nil {
						t.Errorf("interrupted build left a qmodel that does not open: %v", err)
					} else {
						m.Close()
					}
				case strings.HasSuffix(name, ".onnx"):
					if _, err := onnx.ExternalData(p); err != nil {
						t.Errorf("interrupted build left %s: %v", p, err)
					}
					if _, err := os.Stat(strings.TrimSuffix(p, ".onnx") + ".encodings.json"); err != nil {
						t.Errorf("interrupted build left %s without its encodings", p)
					}
				}
				return nil
			})
		})
	}
}

// TestLongCommandsInterrupted interrupts each long-running command a
// moment into its work: every one stops within a second, exits 130, says
// "interrupted" and leaves no temporary file and no output under its
// final name.
func TestLongCommandsInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes and writes a 300 MB model")
	}
	dir := t.TempDir()
	src := writeBigLlama(t, dir, 2)
	for _, tc := range []struct {
		name string
		args func(out string) []string
	}{
		{"convert", func(out string) []string { return []string{"convert", "--to", "gguf", src, out} }},
		{"run", func(string) []string { return []string{"run", src, "--ids", "1,2,3", "-n", "200", "--ignore-eos"} }},
		{"golden", func(out string) []string {
			prompts := writeText(t, dir, "prompts.txt", "ids: 1 2 3\nids: 4 5\n")
			return []string{"golden", "record", src, "--prompts", prompts, "-n", "200", out}
		}},
		// bench is interrupted with its memory-read probe (which reads the
		// model's weights after the untimed reference runs) and without
		// it, each a second in: in the reference runs or the probe, and in
		// the measurements.
		{"bench", func(string) []string { return []string{"bench", src, "-p", "256", "-n", "128", "-r", "3"} }},
		{"bench-measuring", func(string) []string {
			return []string{"bench", src, "-p", "256", "-n", "128", "-r", "3", "--read-probe", "0"}
		}},
		{"sparsify", func(out string) []string { return []string{"sparsify", src, out, "--pattern", "2:4"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outDir := t.TempDir()
			out := filepath.Join(outDir, "out.gguf")
			start := time.Now()
			// On an idle machine convert and golden finish within about two
			// seconds: each is interrupted after one, and convert as soon as
			// its output's temporary file has data.
			r := interruptWhen(t, tc.args(out), func() bool {
				return time.Since(start) > time.Second || tc.name == "convert" && findTemp(outDir, "out.gguf")
			})
			r.check(t, tc.name)
			ents, _ := os.ReadDir(outDir)
			for _, e := range ents {
				t.Errorf("interrupted %s left %s", tc.name, e.Name())
			}
		})
	}
}
