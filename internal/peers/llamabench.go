package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// EnvLlamaBench names a llama-bench binary to use instead of the one
// llama-bench.sh builds.
const EnvLlamaBench = "QNNPREP_LLAMA_BENCH"

// LlamaBenchPath returns the llama-bench binary: $QNNPREP_LLAMA_BENCH, else
// llama-bench/llama-bench beside the node_modules directory (NodeModules),
// where llama-bench.sh builds it. It does not check that it exists.
func LlamaBenchPath() (string, error) {
	if p := os.Getenv(EnvLlamaBench); p != "" {
		p, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("peers: %s: %w", EnvLlamaBench, err)
		}
		return p, nil
	}
	nm, err := NodeModules()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(nm), "llama-bench", "llama-bench"), nil
}

func checkLlamaBench() error {
	p, err := LlamaBenchPath()
	if err != nil {
		return err
	}
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("peer %s not installed: %s missing (bash internal/peers/llama-bench.sh builds it)", LlamaBenchBin, p)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("peer %s: %s is not an executable file", LlamaBenchBin, p)
	}
	// --help loads the libraries beside it, so a broken copy shows here.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, "--help")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	dieWithParent(cmd)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("peer %s: %s --help: %v%s", LlamaBenchBin, p, err, tail(out.Bytes()))
	}
	return nil
}

// LlamaBenchArgs are llama-bench's options for one run of RunLlamaBench.
type LlamaBenchArgs struct {
	Threads int // -t; ≤ 0 means 1
	Prompt  int // -p: pp test of this many tokens; 0 skips pp
	Gen     int // -n: tg test of this many tokens; 0 skips tg
	Depth   int // -d: context tokens processed (untimed) before each test
	Reps    int // -r: timed repetitions; ≤ 0 means 1
	// Timeout kills llama-bench when it runs longer (≤ 0: Timeout); the
	// error then wraps ErrTimedOut.
	Timeout time.Duration
	// Bin is the llama-bench to run ("": LlamaBenchPath), e.g. one that
	// LlamaBenchVariant prepared.
	Bin string
}

// LlamaBenchVariant prepares in dir a llama-bench that can load only one
// variant of ggml's CPU backend (libggml-cpu-VARIANT.so, e.g. "haswell"
// for AVX2 without AVX-512) and returns its path. ggml loads the best
// variant this CPU supports among those beside the executable (resolved
// through /proc/self/exe, so the binary is copied; the libraries are
// symbolic links); with one there, it loads that one or, when the CPU
// lacks its instructions, none, and llama-bench fails.
func LlamaBenchVariant(dir, variant string) (string, error) {
	src, err := LlamaBenchPath()
	if err != nil {
		return "", err
	}
	from := filepath.Dir(src)
	want := "libggml-cpu-" + variant + ".so"
	if _, err := os.Stat(filepath.Join(from, want)); err != nil {
		return "", fmt.Errorf("peers: llama-bench CPU variant %q: %w", variant, err)
	}
	libs, err := filepath.Glob(filepath.Join(from, "*.so*"))
	if err != nil {
		return "", err
	}
	for _, lib := range libs {
		name := filepath.Base(lib)
		if strings.HasPrefix(name, "libggml-cpu-") && name != want {
			continue
		}
		if err := os.Symlink(lib, filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("peers: llama-bench CPU variant %q: %w", variant, err)
		}
	}
	bin := filepath.Join(dir, filepath.Base(src))
	b, err := os.ReadFile(src)
	if err == nil {
		err = os.WriteFile(bin, b, 0o755)
	}
	if err != nil {
		return "", fmt.Errorf("peers: llama-bench CPU variant %q: %w", variant, err)
	}
	return bin, nil
}

// lbEntry is the part of one element of llama-bench's -o json output that
// RunLlamaBench reads; pointers tell a missing field from a zero.
type lbEntry struct {
	NPrompt   *int      `json:"n_prompt"`
	NGen      *int      `json:"n_gen"`
	NDepth    *int      `json:"n_depth"`
	NThreads  *int      `json:"n_threads"`
	AvgTS     *float64  `json:"avg_ts"`
	SamplesNS []float64 `json:"samples_ns"`
	ModelSize *int64    `json:"model_size"`
	Backends  string    `json:"backends"`
	CPUInfo   string    `json:"cpu_info"`
}

// RunLlamaBench times llama.cpp with its own llama-bench tool (built by
// llama-bench.sh against node-llama-cpp's prebuilt CPU libraries, v0.4.0)
// on ggufPath: `llama-bench -m F -t T -p P -n N -d D -r R -o json`, with
// llama-bench's defaults otherwise (batch 2048, micro-batch 512, F16 KV
// cache, flash attention auto, one untimed warm-up, random token ids). It
// returns the seconds of each repetition as llama-bench measured them
// (samples_ns) and the peak RSS of the llama-bench process. The child is
// killed when this process dies.
func RunLlamaBench(ggufPath string, a LlamaBenchArgs) (*LlamaBenchResult, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("peers: llama-bench on %s: %s", ggufPath, fmt.Sprintf(format, args...))
	}
	if a.Prompt < 0 || a.Gen < 0 || a.Depth < 0 {
		return nil, fail("negative prompt %d, gen %d or depth %d", a.Prompt, a.Gen, a.Depth)
	}
	if a.Prompt == 0 && a.Gen == 0 {
		return nil, fail("nothing to time")
	}
	if err := Check(LlamaBenchBin); err != nil {
		return nil, err
	}
	bin := a.Bin
	if bin == "" {
		var err error
		if bin, err = LlamaBenchPath(); err != nil {
			return nil, err
		}
	}
	threads, reps := max(a.Threads, 1), max(a.Reps, 1)
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = Timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	itoa := strconv.Itoa
	cmd := exec.CommandContext(ctx, bin, "-m", ggufPath, "-t", itoa(threads), "-p", itoa(a.Prompt), "-n", itoa(a.Gen),
		"-d", itoa(a.Depth), "-r", itoa(reps), "-o", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	dieWithParent(cmd)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w after %v", ErrTimedOut, timeout)
		}
		return nil, fmt.Errorf("peers: llama-bench on %s: %w%s", ggufPath, err, tail(stderr.Bytes()))
	}
	r, err := parseLlamaBench(stdout.Bytes(), a.Prompt, a.Gen, a.Depth, threads, reps)
	if err != nil {
		return nil, fail("%v%s", err, tail(stderr.Bytes()))
	}
	r.PeakRSS = MaxRSS(cmd.ProcessState)
	if v := cpuVariant(stderr.Bytes()); v != "" && r.Backend == "CPU" {
		r.Backend += " " + v
	}
	return r, nil
}

// cpuVariant is the variant of ggml's CPU backend that llama-bench's log
// says it loaded ("load_backend: loaded CPU backend from
// …/libggml-cpu-zen4.so" gives "zen4"), or "".
func cpuVariant(log []byte) string {
	for line := range bytes.Lines(log) {
		_, path, ok := bytes.Cut(line, []byte("loaded CPU backend from "))
		if !ok {
			continue
		}
		name := filepath.Base(string(bytes.TrimSpace(path)))
		name = strings.TrimSuffix(strings.TrimSuffix(name, ".so"), ".dll")
		if v, ok := strings.CutPrefix(name, "libggml-cpu-"); ok {
			return v
		}
		if v, ok := strings.CutPrefix(name, "ggml-cpu-"); ok {
			return v
		}
	}
	return ""
}

// parseLlamaBench checks llama-bench's JSON output strictly against the
// request: exactly one pp entry (when prompt > 0) and one tg entry (when
// gen > 0), each with the requested sizes, depth and threads and reps
// positive samples.
func parseLlamaBench(out []byte, prompt, gen, depth, threads, reps int) (*LlamaBenchResult, error) {
	dec := json.NewDecoder(bytes.NewReader(out))
	var entries []lbEntry
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("output is not a JSON array of results: %v (output starts %q)", err, head(out))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("output has data after the JSON array")
	}
	var r LlamaBenchResult
	var havePP, haveTG bool
	for i, e := range entries {
		if e.NPrompt == nil || e.NGen == nil || e.NDepth == nil || e.NThreads == nil || e.AvgTS == nil || e.SamplesNS == nil || e.ModelSize == nil {
			return nil, fmt.Errorf("result %d lacks one of n_prompt, n_gen, n_depth, n_threads, avg_ts, samples_ns, model_size", i)
		}
		var kind string
		var dst *[]float64
		switch {
		case *e.NPrompt == prompt && prompt > 0 && *e.NGen == 0 && !havePP:
			kind, dst, havePP = "pp", &r.PPSeconds, true
		case *e.NGen == gen && gen > 0 && *e.NPrompt == 0 && !haveTG:
			kind, dst, haveTG = "tg", &r.TGSeconds, true
		default:
			return nil, fmt.Errorf("unexpected result %d: n_prompt %d, n_gen %d (asked for pp%d and tg%d, one each)", i, *e.NPrompt, *e.NGen, prompt, gen)
		}
		if *e.NDepth != depth || *e.NThreads != threads {
			return nil, fmt.Errorf("%s result: depth %d and %d threads, asked for %d and %d", kind, *e.NDepth, *e.NThreads, depth, threads)
		}
		if len(e.SamplesNS) != reps {
			return nil, fmt.Errorf("%s result: %d samples, asked for %d repetitions", kind, len(e.SamplesNS), reps)
		}
		r.Backend, r.CPU = e.Backends, e.CPUInfo
		for _, ns := range e.SamplesNS {
			if !(ns > 0) {
				return nil, fmt.Errorf("%s result: sample of %v ns is not positive", kind, ns)
			}
			*dst = append(*dst, ns/1e9)
		}
	}
	if prompt > 0 && !havePP || gen > 0 && !haveTG {
		return nil, fmt.Errorf("missing results: got pp %v, tg %v for pp%d and tg%d", havePP, haveTG, prompt, gen)
	}
	return &r, nil
}

// head is the start of b for an error message.
func head(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
