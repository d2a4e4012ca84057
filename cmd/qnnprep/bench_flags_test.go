package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/bench"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/testkit"
)

// benchJSON runs bench -o json on model with small sizes plus extra and
// returns its one report.
func benchJSON(t *testing.T, model string, extra ...string) *bench.Report {
	t.Helper()
	args := append([]string{"bench", model, "-p", "8", "-n", "4", "-d", "0", "-r", "1", "-t", "1", "-q", "-o", "json", "--read-probe", "0"}, extra...)
	var code int
	out := captureStdout(t, func() { captureStderr(t, func() { code = run(args) }) })
	var s bench.Suite
	if err := json.Unmarshal([]byte(out), &s); err != nil || len(s.Reports) != 1 {
		t.Fatalf("%v: exit %d, %v:\n%s", extra, code, err, out)
	}
	return s.Reports[0]
}

// maxDiff is the largest |Δlogit| the sanity check of the prompt (pp)
// run saw; the generation run's is dominated by the first wrong token.
func maxDiff(r *bench.Report) float64 { return r.Results[0].MaxAbsDiff }

// TestBenchFlags: each bench flag changes the report as documented. A
// fault makes the timed runs differ from the reference, so the flags that
// change the arithmetic or the tokens (--kv-f16, --seed) show in the
// prompt run's largest difference, --tolerance in its verdict; --batch and
// --ref-threads must leave the numbers unchanged.
func TestBenchFlags(t *testing.T) {
	src := synthLlamaGGUF(t)
	const fault = "blk.0.ffn_down.weight=1.01"
	base := benchJSON(t, src)
	faulty := benchJSON(t, src, "--fault", fault)
	if base.Results[0].Sane == nil || !*base.Results[0].Sane || len(base.Results[0].Samples) != 1 || maxDiff(faulty) == 0 || *faulty.Results[0].Sane {
		t.Fatalf("baseline: %+v; with a fault: sane %v, max diff %g", base.Results, faulty.Sane, maxDiff(faulty))
	}
	for _, tt := range []struct {
		flag  string
		args  []string
		check func(r *bench.Report) bool
	}{
		{"reps", []string{"-r", "2"}, func(r *bench.Report) bool { return len(r.Results[0].Samples) == 2 }},
		{"no-sanity", []string{"--no-sanity"}, func(r *bench.Report) bool { return r.Results[0].Sane == nil }},
		{"read-probe", []string{"--read-probe", "all"}, func(r *bench.Report) bool {
			c := r.Machine.ReadCeiling
			return len(c) == 1 && c[0].Source == bench.SourceWeights && c[0].Bytes > 0 && c[0].Bytes <= r.Model.DecodeBytes && base.Machine.ReadCeiling == nil
		}},
		{"kv-f16", []string{"--kv-f16", "--fault", fault}, func(r *bench.Report) bool {
			return r.Settings.KVF16 && maxDiff(r) != maxDiff(faulty)
		}},
		{"seed", []string{"--seed", "7", "--fault", fault}, func(r *bench.Report) bool { return maxDiff(r) != maxDiff(faulty) }},
		{"tolerance", []string{"--tolerance", "1000", "--fault", fault}, func(r *bench.Report) bool { return *r.Results[0].Sane && maxDiff(r) > 0 }},
		{"batch", []string{"--batch", "3", "--fault", fault}, func(r *bench.Report) bool {
			return r.Settings.Batch == 3 && maxDiff(r) == maxDiff(faulty)
		}},
		{"ref-threads", []string{"--ref-threads", "3", "--fault", fault}, func(r *bench.Report) bool {
			return r.Settings.RefThreads == 3 && maxDiff(r) == maxDiff(faulty)
		}},
		{"draft", []string{"--draft", src, "-k", "2"}, func(r *bench.Report) bool {
			return r.Draft != nil && r.Draft.Path == src && len(r.Speculative) == 1
		}},
		{"spec-depth", []string{"--draft-layers", "1", "-k", "2", "--spec-depth", "6"}, func(r *bench.Report) bool {
			// Filled context + the prompt (the speculative text): 6 more
			// than without --spec-depth.
			r0 := benchJSON(t, src, "--draft-layers", "1", "-k", "2")
			return len(r.Speculative) == 1 && len(r0.Speculative) == 1 && r.Speculative[0].Depth == 6+r0.Speculative[0].Depth
		}},
	} {
		t.Run(tt.flag, func(t *testing.T) {
			if r := benchJSON(t, src, tt.args...); !tt.check(r) {
				b, _ := json.Marshal(r)
				t.Errorf("%v: %s", tt.args, b)
			}
		})
	}
}

// TestBenchLlamaFlags: --llama adds llama.cpp rows, timed by the peer
// --llama-peer names.
func TestBenchLlamaFlags(t *testing.T) {
	src := synthLlamaGGUF(t)
	for _, tt := range []struct{ flag, peer, need string }{
		{"node", "node-llama-cpp", peers.NodeLlamaCpp},
		{"llama-bench", "llama-bench", peers.LlamaBenchBin},
	} {
		t.Run(tt.flag, func(t *testing.T) {
			testkit.Need(t, tt.need)
			r := benchJSON(t, src, "--llama", "--llama-peer", tt.flag)
			n := 0
			for _, x := range r.Results {
				if x.Engine == "llama.cpp" && x.Peer == tt.peer {
					n++
				}
			}
			if n != 2 {
				t.Errorf("--llama --llama-peer %s: %d llama.cpp rows timed by %s, want 2 (pp and tg)", tt.flag, n, tt.peer)
			}
		})
	}
	// --llama-cpu haswell: llama-bench may load only the AVX2 variant of
	// ggml's CPU backend, and the rows say it did.
	t.Run("llama-cpu", func(t *testing.T) {
		testkit.Need(t, peers.LlamaBenchBin)
		r := benchJSON(t, src, "--llama", "--llama-peer", "llama-bench", "--llama-cpu", "haswell")
		n := 0
		for _, x := range r.Results {
			if x.Engine == "llama.cpp" {
				if x.Backend != "CPU haswell" || x.Error != "" {
					t.Errorf("--llama-cpu haswell: %s row: backend %q, error %q", x.Test, x.Backend, x.Error)
				}
				n++
			}
		}
		if n != 2 {
			t.Errorf("--llama-cpu haswell: %d llama.cpp rows, want 2", n)
		}
	})
}

// TestBenchLlamaTimeout: with --llama-timeout, a llama-bench that hangs
// is stopped at the timeout; bench still prints what qnnprep measured,
// marks the llama.cpp rows as timed out and exits 1.
func TestBenchLlamaTimeout(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("the fake llama-bench is a shell script")
	}
	fake, err := filepath.Abs("../../bench/testdata/fake-llama-bench.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(peers.EnvLlamaBench, fake)
	t.Setenv("QNNPREP_FAKE_LLAMA_BENCH", "hang")
	src := synthLlamaGGUF(t)
	var code int
	var stderr string
	start := time.Now()
	out := captureStdout(t, func() {
		stderr = captureStderr(t, func() {
			code = run([]string{"bench", src, "-p", "8", "-n", "4", "-r", "1", "-t", "1", "-q", "-o", "json", "--read-probe", "0",
				"--llama", "--llama-peer", "llama-bench", "--llama-timeout", "500ms"})
		})
	})
	var s bench.Suite
	if err := json.Unmarshal([]byte(out), &s); err != nil || len(s.Reports) != 1 {
		t.Fatalf("exit %d, %v:\n%s\n%s", code, err, out, stderr)
	}
	var timedOut, measured int
	for _, x := range s.Reports[0].Results {
		switch {
		case x.Engine == "llama.cpp" && x.TimedOut && strings.Contains(x.Error, "timed out after 500ms"):
			timedOut++
		case x.Engine == "qnnprep" && x.TokensPerSec > 0:
			measured++
		}
	}
	if code != 1 || timedOut != 2 || measured != 2 || !strings.Contains(stderr, "llama.cpp gave no timings for 2 rows") || time.Since(start) > 60*time.Second {
		t.Errorf("exit %d after %v, %d rows timed out, %d measured; stderr:\n%s", code, time.Since(start), timedOut, measured, stderr)
	}
}

// TestBenchConvertFlags: --dir is where the outputs are written (and
// removed), --scratch where the compute-only pass writes; -t the workers,
// which do not change the output.
func TestBenchConvertFlags(t *testing.T) {
	src := synthLlamaGGUF(t)
	var sizes []int64
	for _, threads := range []string{"1", "3"} {
		dir := t.TempDir()
		var code int
		out := captureStdout(t, func() {
			code = run([]string{"bench", "convert", src, "--recipe", "q1", "--dir", dir, "--scratch", filepath.Join(dir, "missing"), "-t", threads, "-q", "-o", "json"})
		})
		if code == 0 {
			t.Fatalf("--scratch naming a missing directory: exit 0\n%s", out)
		}
		out = captureStdout(t, func() {
			code = run([]string{"bench", "convert", src, "--recipe", "q1", "--dir", filepath.Join(dir, "missing"), "-t", threads, "-q", "-o", "json"})
		})
		if code == 0 {
			t.Fatalf("--dir naming a missing directory: exit 0\n%s", out)
		}
		out = captureStdout(t, func() {
			code = run([]string{"bench", "convert", src, "--recipe", "q1", "--dir", dir, "--scratch", dir, "-t", threads, "-q", "-o", "json"})
		})
		var s bench.Suite
		if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
			t.Fatalf("exit %d, %v\n%s", code, err, out)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("--dir %s: %d files left", dir, len(left))
		}
		sizes = append(sizes, s.Conversions[0].OutputBytes)
	}
	if sizes[0] != sizes[1] || sizes[0] == 0 {
		t.Errorf("output bytes %v with 1 and 3 workers", sizes)
	}
}
