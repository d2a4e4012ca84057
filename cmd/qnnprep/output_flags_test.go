package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJSONFlags: --json turns a command's table into JSON (and without it
// the output is not JSON); --report writes the same JSON to a file.
func TestJSONFlags(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	prompts := writeText(t, dir, "prompts.txt", "ids: 1 403 407\n")
	g := filepath.Join(dir, "golden.json")
	plan := filepath.Join(dir, "plan.json")
	for _, args := range [][]string{
		{"golden", "record", storiesGGUF, "--prompts", prompts, "-n", "8", g},
		{"plan", storiesGGUF, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", plan},
	} {
		var code int
		captureStdout(t, func() { code = run(args) })
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
	}
	root := fakeSDKRoot(t)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"check", []string{"check", plan}},
		{"compare", []string{"compare", storiesGGUF, "--golden", g}},
		{"quantize", []string{"quantize", storiesGGUF, filepath.Join(dir, "q.gguf"), "--recipe", "q8_0"}},
		{"sdk", []string{"sdk", "--qnn-sdk", root}},
		{"inspect", []string{"inspect", storiesGGUF}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var code int
			table := captureStdout(t, func() { code = run(tt.args) })
			if code != 0 || json.Valid([]byte(table)) || strings.TrimSpace(table) == "" {
				t.Fatalf("without --json: exit %d, output:\n%s", code, table)
			}
			js := captureStdout(t, func() { code = run(append(tt.args, "--json")) })
			if code != 0 || !json.Valid([]byte(js)) {
				t.Fatalf("--json: exit %d, output:\n%s", code, js)
			}
		})
	}
}

// TestQuantizeReport: --report writes the per-tensor report that --json
// prints.
func TestQuantizeReport(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	var code int
	js := captureStdout(t, func() {
		code = run([]string{"quantize", storiesGGUF, filepath.Join(dir, "q.gguf"), "--recipe", "q8_0", "--json", "--report", report})
	})
	b, err := os.ReadFile(report)
	if code != 0 || err != nil || !json.Valid(b) || strings.TrimSpace(string(b)) != strings.TrimSpace(js) {
		t.Fatalf("exit %d, %v; report:\n%.500s\nstdout:\n%.500s", code, err, b, js)
	}
}

// TestSDKFlag: sdk finds the SDK --qnn-sdk names (over $QNN_SDK_ROOT) and
// prints its layout; with neither it fails.
func TestSDKFlag(t *testing.T) {
	root := fakeSDKRoot(t)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	var code int
	if errOut := captureStderr(t, func() { code = run([]string{"sdk"}) }); code != 1 || !strings.Contains(errOut, "--qnn-sdk") {
		t.Errorf("no SDK: exit %d: %s", code, errOut)
	}
	t.Setenv("QNN_SDK_ROOT", filepath.Join(t.TempDir(), "elsewhere"))
	out := captureStdout(t, func() { code = run([]string{"sdk", "--qnn-sdk", root}) })
	if code != 0 || !strings.Contains(out, root) || !strings.Contains(out, "x86_64-linux-clang") || !strings.Contains(out, "8elite-gen5") {
		t.Errorf("--qnn-sdk: exit %d:\n%s", code, out)
	}
}

// TestQuietFlags: -q silences the progress (and convert's summary) that
// the command prints without it; the results stay.
func TestQuietFlags(t *testing.T) {
	needStories(t)
	src := synthLlamaGGUF(t)
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	runOK(t, "plan", storiesGGUF, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", plan)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	for _, tt := range []struct {
		name   string
		args   func(out string) []string
		stdout bool // the silenced text is on stdout, else stderr
	}{
		{"bench", func(string) []string { return []string{"bench", src, "-p", "4", "-n", "2", "-r", "1", "--no-sanity"} }, false},
		{"bench convert", func(string) []string { return []string{"bench", "convert", src, "--recipe", "q8_0", "--dir", dir} }, false},
		{"build", func(out string) []string {
			return []string{"build", src, out, "--recipe", "q8_0", "--stages", "1", "--ar", "8,1", "--cl", "64", "--calibrate", "0", "--no-verify"}
		}, false},
		{"convert", func(out string) []string { return []string{"convert", fixture(t, "stories260K/hf"), out} }, true},
		{"export", func(out string) []string { return []string{"export", "onnx", plan, storiesGGUF, out} }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var texts [2]string
			for i, q := range []bool{false, true} {
				args := tt.args(filepath.Join(t.TempDir(), "out"))
				if q {
					args = append(args, "-q")
				}
				var code int
				var stdout string
				stderr := captureStderr(t, func() { stdout = captureStdout(t, func() { code = run(args) }) })
				if code != 0 {
					t.Fatalf("-q=%v: exit %d\n%s\n%s", q, code, stdout, stderr)
				}
				texts[i] = stderr
				if tt.stdout {
					texts[i] = stdout
				}
			}
			if strings.TrimSpace(texts[0]) == "" || strings.TrimSpace(texts[1]) != "" {
				t.Errorf("without -q:\n%s\nwith -q:\n%s", texts[0], texts[1])
			}
		})
	}
}
