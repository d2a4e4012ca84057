package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// timingKey matches the JSON keys that hold measured time or speed, the
// only part of an output that may differ between thread counts.
var timingKey = regexp.MustCompile(`(?i)(^|_)(ms|seconds|secs|time|elapsed|duration|per_s|tokens_per_s|mb_per_s|gb_per_s|throughput)($|_)`)

// stripTimings removes timing keys from a JSON value, recursively.
func stripTimings(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if timingKey.MatchString(k) {
				delete(x, k)
			} else {
				x[k] = stripTimings(e)
			}
		}
	case []any:
		for i := range x {
			x[i] = stripTimings(x[i])
		}
	}
	return v
}

// TestThreadsDoNotChangeOutputs: -t only changes how many workers run; the
// files and the JSON results (less their timings) are the same for 1 and
// 3 threads.
func TestThreadsDoNotChangeOutputs(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	prompts := writeText(t, dir, "prompts.txt", "Once upon a time\nids: 1 403 407\n")
	g := filepath.Join(dir, "golden.json")
	if code := run([]string{"golden", "record", storiesGGUF, "--prompts", prompts, "-n", "12", g}); code != 0 {
		t.Fatalf("golden record: exit %d", code)
	}
	synth := synthLlamaGGUF(t)
	tests := []struct {
		name string
		args func(out string) []string // out: a fresh output path
		file bool                      // compare the file at out, else stdout's JSON
	}{
		{"golden record", func(out string) []string {
			return []string{"golden", "record", storiesGGUF, "--prompts", prompts, "-n", "12", out}
		}, true},
		{"quantize", func(out string) []string { return []string{"quantize", storiesGGUF, out, "--recipe", "q1"} }, true},
		{"run", func(out string) []string {
			return []string{"run", storiesGGUF, "--ids", "1,403,407", "-n", "12", "--logits", out}
		}, true},
		{"verify", func(string) []string { return []string{"verify", storiesGGUF, "--golden", g, "--json"} }, false},
		{"compare", func(string) []string { return []string{"compare", storiesGGUF, "--golden", g, "--json"} }, false},
		{"speculate", func(string) []string {
			return []string{"speculate", storiesGGUF, "--draft", storiesGGUF, "-k", "3", "--ids", "1", "-n", "16", "--json"}
		}, false},
		{"sparsify", func(out string) []string {
			return []string{"sparsify", synth, out, "--pattern", "2:4", "--prompts", prompts, "--steps", "4", "--json"}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, threads := range []string{"1", "3"} {
				out := filepath.Join(t.TempDir(), "out")
				var code int
				stdout := captureStdout(t, func() { code = run(append(tt.args(out), "-t", threads)) })
				if code != 0 {
					t.Fatalf("-t %s: exit %d\n%s", threads, code, stdout)
				}
				if tt.file {
					b, err := os.ReadFile(out)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, string(b))
					continue
				}
				var v any
				if err := json.Unmarshal([]byte(stdout), &v); err != nil {
					t.Fatalf("-t %s: %v\n%s", threads, err, stdout)
				}
				b, _ := json.Marshal(stripTimings(v))
				got = append(got, strings.ReplaceAll(string(b), out, "OUT"))
			}
			if got[0] != got[1] {
				t.Errorf("-t 1 and -t 3 give different outputs:\n%.2000s\n%.2000s", got[0], got[1])
			}
		})
	}
}
