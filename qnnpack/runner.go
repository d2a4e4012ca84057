package qnnpack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// RunOptions control RunJobs.
type RunOptions struct {
	Parallel   int           // jobs at once; 0 means 2 (the tools are memory-hungry)
	Timeout    time.Duration // per job; 0 means no limit
	SDKVersion string        // part of every cache key
	Force      bool          // run every job even if its cache entry matches
	Log        io.Writer     // one line per job; nil for none
}

// JobResult says what happened to one job.
type JobResult struct {
	Job      *Job
	Cached   bool // outputs were up to date; the tool did not run
	Ran      bool
	Duration time.Duration
}

// ToolError is a tool that failed: which stage and tool, how it ended and
// where its full output is.
type ToolError struct {
	Stage    int // 0-based
	Graph    string
	Tool     string
	ExitCode int      // -1 if it did not exit normally
	Signal   string   // set when killed by a signal
	Stderr   []string // its last stderr lines
	Log      string
	Err      error // a start failure, timeout or missing output
}

func (e *ToolError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "qnnpack: stage %d", e.Stage+1)
	if e.Graph != "" {
		fmt.Fprintf(&b, " (graph %s)", e.Graph)
	}
	fmt.Fprintf(&b, ": %s ", e.Tool)
	switch {
	case e.Err != nil && e.ExitCode == 0:
		fmt.Fprintf(&b, "failed: %v", e.Err)
	case e.Signal != "":
		fmt.Fprintf(&b, "killed by %s", e.Signal)
		if e.Err != nil {
			fmt.Fprintf(&b, " (%v)", e.Err)
		}
	default:
		fmt.Fprintf(&b, "failed with exit code %d", e.ExitCode)
	}
	fmt.Fprintf(&b, "; log: %s", e.Log)
	if len(e.Stderr) > 0 {
		b.WriteString("\n  last stderr lines:")
		for _, l := range e.Stderr {
			b.WriteString("\n    " + l)
		}
	}
	return b.String()
}

func (e *ToolError) Unwrap() error { return e.Err }

// stderrTail is how many stderr lines a ToolError keeps.
const stderrTail = 10

// RunJobs runs jobs respecting Deps, at most opts.Parallel at a time. A
// job whose cache record matches (same SDK version, tool, args and input
// contents, and outputs unchanged since) is skipped. After a failure no new
// job starts; running ones finish. When ctx is cancelled every running
// tool's process group is killed, temporary outputs are removed and
// ctx.Err() is returned.
func RunJobs(ctx context.Context, jobs []Job, opts RunOptions) ([]JobResult, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 2
	}
	for i := range jobs {
		for _, d := range jobs[i].Deps {
			if d < 0 || d >= i {
				return nil, fmt.Errorf("qnnpack: job %d (%s) depends on job %d, which does not come before it", i, jobs[i].Name(), d)
			}
		}
	}
	r := &runner{opts: opts, hashes: map[string]string{}}
	results := make([]JobResult, len(jobs))
	done := make([]chan struct{}, len(jobs))
	failed := make([]bool, len(jobs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	sem := make(chan struct{}, opts.Parallel)
	var (
		mu      sync.Mutex
		errs    []error
		stop    bool
		wg      sync.WaitGroup
		counter int
	)
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[i])
			j := &jobs[i]
			results[i].Job = j
			for _, d := range j.Deps {
				<-done[d]
			}
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
			}
			mu.Lock()
			skip := stop || ctx.Err() != nil
			for _, d := range j.Deps {
				skip = skip || failed[d]
			}
			mu.Unlock()
			if skip {
				mu.Lock()
				failed[i] = true
				mu.Unlock()
				return
			}
			start := time.Now()
			cached, err := r.run(ctx, j)
			results[i].Duration = time.Since(start)
			results[i].Cached, results[i].Ran = cached, !cached && err == nil
			mu.Lock()
			defer mu.Unlock()
			counter++
			if err != nil {
				failed[i] = true
				stop = true
				if ctx.Err() == nil {
					errs = append(errs, err)
				}
				return
			}
			if opts.Log != nil {
				state := fmt.Sprintf("done in %.1fs", results[i].Duration.Seconds())
				if cached {
					state = "up to date"
				}
				fmt.Fprintf(opts.Log, "[%d/%d] %s: %s\n", counter, len(jobs), j.Name(), state)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return results, fmt.Errorf("qnnpack: build interrupted: %w", err)
	}
	return results, errors.Join(errs...)
}

type runner struct {
	opts   RunOptions
	mu     sync.Mutex
	hashes map[string]string // path → SHA-256 of files hashed or written in this run
}

// hashFile returns the hex SHA-256 of a file's contents.
func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (r *runner) hash(path string) (string, error) {
	r.mu.Lock()
	h, ok := r.hashes[path]
	r.mu.Unlock()
	if ok {
		return h, nil
	}
	h, err := hashFile(path)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.hashes[path] = h
	r.mu.Unlock()
	return h, nil
}

// cacheRecord is the file that remembers a job's key and its outputs'
// hashes.
func cacheRecord(j *Job) string {
	out := j.Outputs[0]
	return filepath.Join(filepath.Dir(out), ".cache", filepath.Base(out)+".sha256")
}

// key hashes everything that determines a job's outputs.
func (r *runner) key(j *Job) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "qnnprep job v1\x00%s\x00%s\x00", r.opts.SDKVersion, j.Tool)
	for _, a := range j.Args {
		fmt.Fprintf(h, "%s\x00", a)
	}
	for _, in := range j.Inputs {
		d, err := r.hash(in)
		if err != nil {
			return "", fmt.Errorf("qnnpack: stage %d: %s: input %s: %w", j.Stage+1, j.Name(), in, err)
		}
		fmt.Fprintf(h, "%s\x00%s\x00", in, d)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// record is the cache file's content: the key, then "hash path" per output.
func (r *runner) record(j *Job, key string) (string, error) {
	var b strings.Builder
	b.WriteString(key + "\n")
	for _, o := range j.Outputs {
		d, err := r.hash(o)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s %s\n", d, filepath.Base(o))
	}
	return b.String(), nil
}

// upToDate reports whether j's cache record matches key and its outputs.
func (r *runner) upToDate(j *Job, key string) bool {
	old, err := os.ReadFile(cacheRecord(j))
	if err != nil || !bytes.HasPrefix(old, []byte(key+"\n")) {
		return false
	}
	for _, o := range j.Outputs {
		if !fileExists(o) {
			return false
		}
	}
	now, err := r.record(j, key)
	return err == nil && now == string(old)
}

// run runs one job unless its cache says it is up to date.
func (r *runner) run(ctx context.Context, j *Job) (cached bool, err error) {
	key, err := r.key(j)
	if err != nil {
		return false, err
	}
	if !r.opts.Force && r.upToDate(j, key) {
		return true, nil
	}
	if err := r.exec(ctx, j); err != nil {
		return false, err
	}
	rec, err := r.record(j, key)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(cacheRecord(j)), 0o755); err != nil {
		return false, err
	}
	return false, atomicfile.WriteFile(cacheRecord(j), []byte(rec))
}

// exec runs the tool in its own process group, then moves its outputs from
// TempDir into place.
func (r *runner) exec(ctx context.Context, j *Job) error {
	toolErr := func(err error) *ToolError {
		return &ToolError{Stage: j.Stage, Graph: j.Graph, Tool: j.Tool, Log: j.Log, Err: err}
	}
	if err := os.RemoveAll(j.TempDir); err != nil {
		return toolErr(err)
	}
	defer os.RemoveAll(j.TempDir)
	if err := os.MkdirAll(j.TempDir, 0o755); err != nil {
		return toolErr(err)
	}
	if err := os.MkdirAll(filepath.Dir(j.Log), 0o755); err != nil {
		return toolErr(err)
	}
	// The log is diagnostics, not an output: written in place so that a
	// failed or interrupted run leaves it behind to read.
	logf, err := os.Create(j.Log)
	if err != nil {
		return toolErr(err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "$ %s\n", j.Command())

	if r.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.opts.Timeout)
		defer cancel()
	}
	tail := &lineTail{max: stderrTail}
	cmd := exec.CommandContext(ctx, j.Path, j.Args...)
	cmd.Stdout = logf
	cmd.Stderr = io.MultiWriter(logf, tail)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return toolErr(fmt.Errorf("start %s: %w", j.Path, err))
	}
	werr := cmd.Wait()
	// Whatever the tool left running in its group goes too.
	killGroup(cmd.Process.Pid)
	if werr != nil || ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return ctx.Err()
		}
		e := toolErr(nil)
		e.ExitCode = -1
		e.Stderr = tail.lines()
		if cmd.ProcessState != nil {
			e.ExitCode = cmd.ProcessState.ExitCode()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				e.Signal = ws.Signal().String()
			}
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			e.Err = fmt.Errorf("timed out after %s", r.opts.Timeout)
		}
		fmt.Fprintf(logf, "\nqnnprep: %v\n", werr)
		return e
	}
	for _, o := range j.Outputs {
		tmp := filepath.Join(j.TempDir, filepath.Base(o))
		fi, err := os.Stat(tmp)
		if err != nil || fi.Size() == 0 {
			e := toolErr(fmt.Errorf("exited 0 but did not write %s", filepath.Base(o)))
			e.Stderr = tail.lines()
			return e
		}
		if err := os.Rename(tmp, o); err != nil {
			return toolErr(err)
		}
		r.mu.Lock()
		delete(r.hashes, o)
		r.mu.Unlock()
	}
	return nil
}

// killGroup sends SIGKILL to process group pgid; a group already gone is
// fine.
func killGroup(pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// lineTail keeps the last max lines written to it.
type lineTail struct {
	mu      sync.Mutex
	max     int
	partial []byte
	buf     []string
}

func (t *lineTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.push(string(t.partial[:i]))
		t.partial = t.partial[i+1:]
	}
	if len(t.partial) > 4096 { // a very long line without newline
		t.push(string(t.partial))
		t.partial = t.partial[:0]
	}
	return len(p), nil
}

func (t *lineTail) push(l string) {
	l = strings.TrimRight(l, "\r")
	if strings.TrimSpace(l) == "" {
		return
	}
	t.buf = append(t.buf, l)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
}

func (t *lineTail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.buf...)
	if len(t.partial) > 0 {
		out = append(out, string(t.partial))
		if len(out) > t.max {
			out = out[len(out)-t.max:]
		}
	}
	return out
}
