package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/sparse/study"
)

// TestSparsifyFlags: --align, --select/--calib, --recipe, --override,
// --prompts and --report each change the variant or what is written.
func TestSparsifyFlags(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	sparsify := func(extra ...string) (study.Result, string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "v.gguf")
		var res study.Result
		stdout := runOK(t, append([]string{"sparsify", storiesGGUF, out, "--steps", "4", "--json"}, extra...)...)
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stdout)
		}
		return res, out
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	// --align: the pruned width becomes a multiple of N.
	plain, _ := sparsify("--pattern", "channel", "--sparsity", "0.3", "--prune")
	aligned, _ := sparsify("--pattern", "channel", "--sparsity", "0.3", "--prune", "--align", "16")
	if h, a := plain.Pruned.Config.Hidden, aligned.Pruned.Config.Hidden; h%16 == 0 || a%16 != 0 || a >= h {
		t.Errorf("pruned hidden %d without --align, %d with --align 16", h, a)
	}

	// --select wanda weighs by the --calib prompts' activations: other
	// prompts, other zeros; magnitude ignores them.
	calibA, calibB := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	os.WriteFile(calibA, []byte("ids: 1 403 407 261\n"), 0o644)
	os.WriteFile(calibB, []byte("ids: 1 20 30 40 50 60\nOnce upon a time\n"), 0o644)
	_, mag := sparsify("--pattern", "2:4")
	_, wa := sparsify("--pattern", "2:4", "--select", "wanda", "--calib", calibA)
	_, wb := sparsify("--pattern", "2:4", "--select", "wanda", "--calib", calibB)
	if read(mag) == read(wa) || read(wa) == read(wb) {
		t.Error("--select wanda with --calib A and B, and magnitude: not three different variants")
	}

	// --recipe and --override: the variant's tensor types.
	_, q8 := sparsify("--pattern", "2:4", "--recipe", "q8_0", "--override", "blk.0.attn_q.weight=F16")
	if a, b := tensorType(t, q8, "blk.1.attn_q.weight"), tensorType(t, q8, "blk.0.attn_q.weight"); a != "Q8_0" || b != "F16" {
		t.Errorf("--recipe q8_0 --override blk.0.attn_q.weight=F16: %s and %s", a, b)
	}
	_, keep := sparsify("--pattern", "2:4")
	if a := tensorType(t, keep, "blk.1.attn_q.weight"); a != "F32" {
		t.Errorf("default recipe keep: %s", a)
	}

	// --prompts: the golden is recorded from these prompts.
	prompts := writeText(t, dir, "prompts.txt", "ids: 1 7 8 9\n")
	saved := filepath.Join(dir, "saved.json")
	sparsify("--pattern", "2:4", "--prompts", prompts, "--save-golden", saved)
	g, err := golden.Read(saved)
	if err != nil || len(g.Prompts) != 1 || jsonString(g.Prompts[0].IDs) != "[1,7,8,9]" {
		t.Errorf("--prompts: golden %v %s", err, jsonString(g))
	}

	// --report writes the JSON result to a file.
	report := filepath.Join(dir, "report.json")
	out := filepath.Join(dir, "r.gguf")
	stdout := runOK(t, "sparsify", storiesGGUF, out, "--pattern", "2:4", "--steps", "4", "--json", "--report", report)
	if got := read(report); strings.TrimSpace(got) != strings.TrimSpace(stdout) || !json.Valid([]byte(got)) {
		t.Errorf("--report:\n%.300s\nstdout:\n%.300s", got, stdout)
	}
}
