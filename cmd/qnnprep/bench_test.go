package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/bench"
)

// TestBenchCommand runs `qnnprep bench` on a small synthetic llama: the
// table, JSON and CSV outputs, the plot, exit 1 when a deliberately
// broken kernel makes the sanity column say NO, and `bench report`
// re-rendering saved JSON.
func TestBenchCommand(t *testing.T) {
	model := synthLlamaGGUF(t)
	dir := t.TempDir()
	png := filepath.Join(dir, "b.png")
	common := []string{"bench", model, "-p", "8", "-n", "4", "-d", "0,8", "-r", "1", "-t", "1,2", "-q"}

	var code int
	out := captureStdout(t, func() { code = run(append(common, "--plot", png)) })
	if code != 0 || !strings.Contains(out, "| pp8 | 0 |") || !strings.Contains(out, "| tg4 | 8 |") || strings.Contains(out, "NO:") {
		t.Fatalf("exit %d, table:\n%s", code, out)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Fatalf("plot: %v", err)
	}

	out = captureStdout(t, func() { code = run(append(common, "-o", "json", "--draft-layers", "1", "-k", "1,2")) })
	var s bench.Suite
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
		t.Fatalf("exit %d, json %v:\n%s", code, err, out)
	}
	if len(s.Reports) != 1 || len(s.Reports[0].Results) != 8 || len(s.Reports[0].Speculative) != 4 {
		t.Fatalf("json: %d reports", len(s.Reports))
	}
	saved := filepath.Join(dir, "b.json")
	if err := os.WriteFile(saved, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	svg := filepath.Join(dir, "r.svg")
	out = captureStdout(t, func() { code = run([]string{"bench", "report", saved, saved, "-o", "csv", "--plot", svg}) })
	if code != 0 || strings.Count(out, "\n") != 1+2*(8+4) {
		t.Fatalf("report: exit %d, csv:\n%s", code, out)
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "speed-up over greedy") {
		t.Fatalf("report plot: %v", err)
	}

	out = captureStdout(t, func() { code = run(append(common, "--fault", "blk.0.ffn_down.weight=1.001")) })
	if code != 1 || !strings.Contains(out, "| NO: ") {
		t.Fatalf("fault: exit %d, table:\n%s", code, out)
	}

	// A model that fails does not lose the others' rows: exit 1, every
	// report written, the failed one saying why.
	broken := filepath.Join(dir, "broken.gguf")
	if err := os.WriteFile(broken, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr string
	out = captureStdout(t, func() {
		stderr = captureStderr(t, func() {
			code = run([]string{"bench", model, broken, "-p", "8", "-n", "4", "-r", "1", "-t", "1", "-q", "-o", "json"})
		})
	})
	s = bench.Suite{}
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 1 || len(s.Reports) != 2 || s.Reports[0].Error != "" ||
		len(s.Reports[0].Results) != 2 || s.Reports[1].Error == "" || !strings.Contains(stderr, "1 of 2 models failed") {
		t.Fatalf("a broken model: exit %d, json %v, stderr %s:\n%s", code, err, stderr, out)
	}

	for _, args := range [][]string{
		{"bench"},
		{"bench", model, "-o", "xml"},
		{"bench", model, "--read-probe", "-1"},
		{"bench", model, "--read-probe", "some"},
		{"bench", model, "--fault", "nonsense"},
		{"bench", "convert", model},
		{"bench", "report"},
	} {
		if code := run(args); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestBenchConvertCommand(t *testing.T) {
	model := synthLlamaGGUF(t)
	var code int
	out := captureStdout(t, func() {
		code = run([]string{"bench", "convert", model, "--recipe", "q1,q8_0", "--dir", t.TempDir(), "--scratch", t.TempDir(), "-q", "-o", "json"})
	})
	var s bench.Suite
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
		t.Fatalf("exit %d, json %v:\n%s", code, err, out)
	}
	if len(s.Conversions) != 2 || s.Conversions[0].Recipe != "q1" || s.Conversions[1].Recipe != "q8_0" {
		t.Fatalf("conversions: %+v", s.Conversions)
	}
	if s.Conversions[0].OutputBytes >= s.Conversions[1].OutputBytes {
		t.Errorf("q1 output %d bytes not smaller than q8_0's %d", s.Conversions[0].OutputBytes, s.Conversions[1].OutputBytes)
	}
}
