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
	"slices"
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
	// SDKRoot is written as ${QNN_SDK_ROOT} in cache keys, so that SDKs
	// installed in different places share cache entries.
	SDKRoot string
	// Cache, when set, is asked for a job's outputs before the tool runs
	// and given them after it ran: a cache shared between processes and
	// machines (package scaleout).
	Cache Cache
	// Select, when set, runs only the jobs it returns true for; the others
	// are left out of the results (a shard of a build). It must keep every
	// job's Deps.
	Select func(j *Job) bool
	// NoRun never starts a tool: a job must be up to date in its work
	// directory or in Cache, and the jobs that are neither are returned in
	// a *MissingError (assembling a bundle from shards' results).
	NoRun bool
}

// Cache stores job outputs under the job's key (the same SHA-256 as the
// work directory's cache records), so that other processes and machines
// building the same job take its outputs instead of running the tool.
type Cache interface {
	// Get writes key's files to outputs (matched by base name), each
	// replaced atomically, and reports false when the cache has no entry
	// for key.
	Get(ctx context.Context, key string, outputs []string) (bool, error)
	// Put stores the outputs under key. Concurrent Puts of one key must
	// leave one complete entry.
	Put(ctx context.Context, key string, outputs []string) error
}

// MissingError lists the jobs a NoRun run found neither up to date nor
// in the cache.
type MissingError struct {
	Jobs []*Job
}

func (e *MissingError) Error() string {
	stages := map[int]bool{}
	for _, j := range e.Jobs {
		stages[j.Stage] = true
	}
	return fmt.Sprintf("qnnpack: %d job(s) of %d stage(s) are neither built nor in the cache", len(e.Jobs), len(stages))
}

// Stages returns the 0-based stages that have missing jobs, in order.
func (e *MissingError) Stages() []int {
	var out []int
	for _, j := range e.Jobs {
		if len(out) == 0 || out[len(out)-1] != j.Stage {
			out = append(out, j.Stage)
		}
	}
	return out
}

// JobResult says what happened to one job.
type JobResult struct {
	Job      *Job
	Cached   bool // outputs were up to date; the tool did not run
	Fetched  bool // Cached, and the outputs came from RunOptions.Cache
	Ran      bool
	Duration time.Duration
}

// JobCounts tallies a build's job results: how many tools ran and their
// total time, how many jobs were up to date, and how many of those came
// from the cache.
type JobCounts struct {
	Ran, UpToDate, Fetched int
	ToolTime               time.Duration
}

// CountJobs tallies runs (Fetched before Cached: a fetched job is also
// cached).
func CountJobs(runs []JobResult) JobCounts {
	var c JobCounts
	for _, r := range runs {
		switch {
		case r.Fetched:
			c.Fetched++
		case r.Cached:
			c.UpToDate++
		default:
			c.Ran++
			c.ToolTime += r.Duration
		}
	}
	return c
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
	var missing []*Job
	if opts.Select != nil {
		for i := range jobs {
			for _, d := range jobs[i].Deps {
				if opts.Select(&jobs[i]) && !opts.Select(&jobs[d]) {
					return nil, fmt.Errorf("qnnpack: job %s is selected but %s, which it depends on, is not", jobs[i].Name(), jobs[d].Name())
				}
			}
		}
	}
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
			if opts.Select != nil && !opts.Select(j) {
				return
			}
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
			cached, fetched, err := r.run(ctx, j)
			results[i].Duration = time.Since(start)
			results[i].Cached, results[i].Ran, results[i].Fetched = cached, !cached && err == nil, fetched
			mu.Lock()
			defer mu.Unlock()
			counter++
			if errors.Is(err, errNotBuilt) {
				failed[i] = true
				missing = append(missing, j)
				return
			}
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
				switch {
				case fetched:
					state = "from the cache"
				case cached:
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
	if opts.Select != nil {
		kept := results[:0]
		for _, res := range results {
			if opts.Select(res.Job) {
				kept = append(kept, res)
			}
		}
		results = kept
	}
	if len(errs) == 0 && len(missing) > 0 {
		// Missing jobs' dependents are not missing themselves: they were
		// skipped. Stage order for the message.
		slices.SortFunc(missing, func(a, b *Job) int { return a.Stage - b.Stage })
		return results, &MissingError{Jobs: missing}
	}
	return results, errors.Join(errs...)
}

// errNotBuilt is a NoRun job that is neither up to date nor in the cache.
var errNotBuilt = errors.New("not built")

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

// key hashes everything that determines a job's outputs, and nothing
// that depends on where the files are: in the arguments every input path
// is replaced by its position (${in0}, ...), the temporary output
// directory by ${tmp} and the SDK root by ${QNN_SDK_ROOT}; inputs are keyed
// by their contents, except Job.Configs, which are keyed by their contents
// with the same paths replaced (the outer context-binary config only names
// files). So builds in different directories, or on different machines
// with the SDK installed elsewhere, share their cache entries.
func (r *runner) key(j *Job) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "qnnprep job v2\x00%s\x00%s\x00", r.opts.SDKVersion, j.Tool)
	paths := r.placeholders(j)
	for _, a := range j.Args {
		fmt.Fprintf(h, "%s\x00", paths.Replace(a))
	}
	for i, in := range j.Inputs {
		var d string
		var err error
		if slices.Contains(j.Configs, in) {
			var b []byte
			if b, err = os.ReadFile(in); err == nil {
				sum := sha256.Sum256([]byte(paths.Replace(string(b))))
				d = hex.EncodeToString(sum[:])
			}
		} else {
			d, err = r.hash(in)
		}
		if err != nil {
			return "", fmt.Errorf("qnnpack: stage %d: %s: input %s: %w", j.Stage+1, j.Name(), in, err)
		}
		fmt.Fprintf(h, "in%d\x00%s\x00", i, d)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// placeholders replaces the paths a job's key must not depend on; longer
// paths first, so that a path inside another is never half-replaced.
func (r *runner) placeholders(j *Job) *strings.Replacer {
	type pair struct{ path, name string }
	var ps []pair
	for i, in := range j.Inputs {
		ps = append(ps, pair{in, fmt.Sprintf("${in%d}", i)})
	}
	if j.TempDir != "" {
		ps = append(ps, pair{j.TempDir, "${tmp}"})
	}
	if r.opts.SDKRoot != "" {
		ps = append(ps, pair{filepath.Clean(r.opts.SDKRoot), "${QNN_SDK_ROOT}"})
	}
	slices.SortStableFunc(ps, func(a, b pair) int { return len(b.path) - len(a.path) })
	var old []string
	for _, p := range ps {
		old = append(old, p.path, p.name)
	}
	return strings.NewReplacer(old...)
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

// run runs one job unless its cache record says it is up to date or
// RunOptions.Cache has its outputs.
func (r *runner) run(ctx context.Context, j *Job) (cached, fetched bool, err error) {
	key, err := r.key(j)
	if err != nil {
		return false, false, err
	}
	if !r.opts.Force && r.upToDate(j, key) {
		return true, false, nil
	}
	c := r.opts.Cache
	if c != nil && !r.opts.Force {
		if err := os.MkdirAll(filepath.Dir(j.Outputs[0]), 0o755); err != nil {
			return false, false, err
		}
		ok, err := c.Get(ctx, key, j.Outputs)
		if err != nil {
			return false, false, fmt.Errorf("qnnpack: stage %d: %s: cache: %w", j.Stage+1, j.Name(), err)
		}
		if ok {
			r.forget(j.Outputs)
			return true, true, r.writeRecord(j, key)
		}
	}
	if r.opts.NoRun {
		return false, false, errNotBuilt
	}
	if err := r.exec(ctx, j); err != nil {
		return false, false, err
	}
	if err := r.writeRecord(j, key); err != nil {
		return false, false, err
	}
	if c != nil {
		if err := c.Put(ctx, key, j.Outputs); err != nil {
			return false, false, fmt.Errorf("qnnpack: stage %d: %s: cache: %w", j.Stage+1, j.Name(), err)
		}
	}
	return false, false, nil
}

func (r *runner) writeRecord(j *Job, key string) error {
	rec, err := r.record(j, key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(cacheRecord(j)), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(cacheRecord(j), []byte(rec))
}

// forget drops remembered hashes of files that were just replaced.
func (r *runner) forget(paths []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range paths {
		delete(r.hashes, p)
	}
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
	ownGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return toolErr(fmt.Errorf("start %s: %w", j.Path, err))
	}
	werr := cmd.Wait()
	// Whatever the tool left running in its group goes too.
	killGroup(cmd.Process)
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
		r.forget([]string{o})
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
