package peers

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLlamaBenchPath(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvLlamaBench, "")
	t.Setenv(EnvDir, filepath.Join(dir, "node_modules"))
	p, err := LlamaBenchPath()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "llama-bench", "llama-bench"); p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	t.Setenv(EnvLlamaBench, "/opt/lb/llama-bench")
	if p, err := LlamaBenchPath(); err != nil || p != "/opt/lb/llama-bench" {
		t.Errorf("with %s: %s, %v", EnvLlamaBench, p, err)
	}

	t.Setenv(EnvLlamaBench, "")
	err = Check(LlamaBenchBin)
	if err == nil || !strings.Contains(err.Error(), "peer llama-bench not installed") {
		t.Errorf("Check with no llama-bench: %v", err)
	}
	if _, err := RunLlamaBench("m.gguf", LlamaBenchArgs{Prompt: 8}); err == nil {
		t.Error("RunLlamaBench without llama-bench: no error")
	}
}

// lbJSON is llama-bench -o json output for the given entries (prompt, gen,
// depth, threads, samples_ns), with a few of the fields it really prints.
func lbJSON(entries ...[5]any) string {
	var parts []string
	for _, e := range entries {
		parts = append(parts, fmt.Sprintf(`{"build_commit": "5b4ebc5", "cpu_info": "AMD EPYC", "backends": "CPU", "model_size": 1000, "n_batch": 2048, "n_prompt": %v, "n_gen": %v, "n_depth": %v, "n_threads": %v, "avg_ts": 100.5, "stddev_ts": 1.5, "samples_ns": %v, "samples_ts": [1, 2]}`, e[0], e[1], e[2], e[3], e[4]))
	}
	return "[\n  " + strings.Join(parts, ",\n  ") + "\n]\n"
}

func TestParseLlamaBench(t *testing.T) {
	good := lbJSON([5]any{16, 0, 32, 2, "[1000000, 2000000]"}, [5]any{0, 8, 32, 2, "[ 3000000, 4000000 ]"})
	r, err := parseLlamaBench([]byte(good), 16, 8, 32, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.PPSeconds, r.TGSeconds) != "[0.001 0.002] [0.003 0.004]" {
		t.Errorf("pp %v, tg %v", r.PPSeconds, r.TGSeconds)
	}
	if r, err := parseLlamaBench([]byte(lbJSON([5]any{0, 8, 0, 1, "[5]"})), 0, 8, 0, 1, 1); err != nil || len(r.PPSeconds) != 0 || len(r.TGSeconds) != 1 {
		t.Errorf("tg only: %v, %v", r, err)
	}
	for _, c := range []struct{ name, out, want string }{
		{"empty", "", "not a JSON array"},
		{"text", "error: failed to load model\n", "not a JSON array"},
		{"trailing", good + "[]", "after the JSON array"},
		{"missing pp", lbJSON([5]any{0, 8, 32, 2, "[1, 2]"}), "missing results"},
		{"extra", good[:len(good)-3] + "," + lbJSON([5]any{0, 8, 32, 2, "[1, 2]"})[1:], "unexpected result 2"},
		{"wrong size", lbJSON([5]any{64, 0, 32, 2, "[1, 2]"}, [5]any{0, 8, 32, 2, "[1, 2]"}), "unexpected result 0: n_prompt 64"},
		{"wrong depth", lbJSON([5]any{16, 0, 0, 2, "[1, 2]"}, [5]any{0, 8, 32, 2, "[1, 2]"}), "pp result: depth 0"},
		{"wrong threads", lbJSON([5]any{16, 0, 32, 2, "[1, 2]"}, [5]any{0, 8, 32, 1, "[1, 2]"}), "tg result: depth 32 and 1 threads"},
		{"reps", lbJSON([5]any{16, 0, 32, 2, "[1]"}, [5]any{0, 8, 32, 2, "[1, 2]"}), "1 samples, asked for 2"},
		{"zero sample", lbJSON([5]any{16, 0, 32, 2, "[1, 0]"}, [5]any{0, 8, 32, 2, "[1, 2]"}), "not positive"},
		{"no samples", strings.Replace(good, `"samples_ns": [1000000, 2000000]`, `"x": 1`, 1), "lacks one of"},
		{"no depth", strings.Replace(good, `"n_depth": 32,`, ``, 1), "lacks one of"},
		{"bad type", strings.Replace(good, `"n_threads": 2`, `"n_threads": "2"`, 1), "not a JSON array"},
	} {
		_, err := parseLlamaBench([]byte(c.out), 16, 8, 32, 2, 2)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// fakeLlamaBench installs a shell script as QNNPREP_LLAMA_BENCH that
// records its arguments and prints out (exit code rc).
func fakeLlamaBench(t *testing.T, out string, rc int) (argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	outFile := filepath.Join(dir, "out.json")
	if err := os.WriteFile(outFile, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\n[ \"$1\" = --help ] && exit 0\necho \"$@\" > %q\necho 'load_backend: fake' >&2\necho 'load_backend: loaded CPU backend from /x/libggml-cpu-zen4.so' >&2\ncat %q\nexit %d\n", argsFile, outFile, rc)
	bin := filepath.Join(dir, "llama-bench")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvLlamaBench, bin)
	return argsFile
}

func TestRunLlamaBenchFake(t *testing.T) {
	args := fakeLlamaBench(t, lbJSON([5]any{16, 0, 4, 2, "[1000000, 2000000, 3000000]"}, [5]any{0, 8, 4, 2, "[4000000, 5000000, 6000000]"}), 0)
	r, err := RunLlamaBench("/m/x.gguf", LlamaBenchArgs{Threads: 2, Prompt: 16, Gen: 8, Depth: 4, Reps: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.PPSeconds) != 3 || len(r.TGSeconds) != 3 || r.TGSeconds[2] != 0.006 {
		t.Errorf("pp %v, tg %v", r.PPSeconds, r.TGSeconds)
	}
	if r.PeakRSS <= 0 {
		t.Errorf("peak RSS %d", r.PeakRSS)
	}
	if r.Backend != "CPU zen4" || r.CPU != "AMD EPYC" {
		t.Errorf("backend %q, CPU %q; want the loaded variant from the log and cpu_info", r.Backend, r.CPU)
	}
	b, err := os.ReadFile(args)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(b)), "-m /m/x.gguf -t 2 -p 16 -n 8 -d 4 -r 3 -o json"; got != want {
		t.Errorf("args %q, want %q", got, want)
	}

	// A failing run names the model and shows llama-bench's stderr.
	fakeLlamaBench(t, "", 1)
	_, err = RunLlamaBench("/m/x.gguf", LlamaBenchArgs{Prompt: 16})
	if err == nil || !strings.Contains(err.Error(), "llama-bench on /m/x.gguf: exit status 1") || !strings.Contains(err.Error(), "load_backend: fake") {
		t.Errorf("failing llama-bench: %v", err)
	}
	// Output for another request.
	fakeLlamaBench(t, lbJSON([5]any{16, 0, 0, 1, "[1]"}), 0)
	_, err = RunLlamaBench("/m/x.gguf", LlamaBenchArgs{Prompt: 16, Reps: 2})
	if err == nil || !strings.Contains(err.Error(), "llama-bench on /m/x.gguf: pp result: 1 samples, asked for 2") {
		t.Errorf("wrong reps: %v", err)
	}
	if _, err := RunLlamaBench("/m/x.gguf", LlamaBenchArgs{}); err == nil || !strings.Contains(err.Error(), "nothing to time") {
		t.Errorf("nothing to time: %v", err)
	}
}

// FuzzParseLlamaBench: any output of a peer gives a result that holds
// what was asked (reps positive samples per requested test) or an error,
// never a panic.
func FuzzParseLlamaBench(f *testing.F) {
	f.Add([]byte(lbJSON([5]any{16, 0, 32, 2, "[1000000, 2000000]"}, [5]any{0, 8, 32, 2, "[3000000, 4000000]"})), uint8(2))
	f.Add([]byte(lbJSON([5]any{0, 8, 32, 2, "[3000000, -1]"})), uint8(2))
	f.Add([]byte(`[{"n_prompt": 16}] trailing`), uint8(1))
	f.Add([]byte(`[]`), uint8(0))
	f.Fuzz(func(t *testing.T, out []byte, reps uint8) {
		r, err := parseLlamaBench(out, 16, 8, 32, 2, int(reps))
		if err != nil {
			return
		}
		if len(r.PPSeconds) != int(reps) || len(r.TGSeconds) != int(reps) {
			t.Fatalf("accepted %d pp and %d tg samples, asked for %d each", len(r.PPSeconds), len(r.TGSeconds), reps)
		}
		for _, s := range append(r.PPSeconds, r.TGSeconds...) {
			if !(s > 0) {
				t.Fatalf("accepted a sample of %v s", s)
			}
		}
	})
}
