package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/shard"
)

const storiesGGUF = "../../../shared/fixtures/stories260K/stories260K-llamacpp.gguf"

func TestPlanCheckCommands(t *testing.T) {
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Skipf("fixture: %v", err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if code := run([]string{"plan", storiesGGUF, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", good}); code != 0 {
		t.Fatalf("plan exit %d", code)
	}
	p, err := shard.ReadPlan(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Stages) != 2 || len(p.Graphs) != 4 || p.Graphs[0].Name != "llama_ar32_cl128_01_of_02" {
		t.Errorf("plan: %d stages, %d graphs, first %s", len(p.Stages), len(p.Graphs), p.Graphs[0].Name)
	}
	if code := run([]string{"check", good}); code != 0 {
		t.Errorf("check of a consistent plan: exit %d", code)
	}

	// The SSD-on-AR-c failure: plan still writes the file, check fails.
	bad := filepath.Join(dir, "bad.json")
	if code := run([]string{"plan", storiesGGUF, "--layers-per-stage", "1", "--ar", "32", "--cl", "32", "--arc",
		"--dialog", "ssd-q1", "--forecast-token-count", "1", "--branches", "1", "--forecast-prefix", "16", "-o", bad}); code != 0 {
		t.Fatalf("plan exit %d", code)
	}
	if code := run([]string{"check", "--probe-prompt", "3", bad}); code != 1 {
		t.Errorf("check of an AR-c SSD plan: exit %d, want 1", code)
	}

	for _, args := range [][]string{
		{"plan", storiesGGUF, "--stages", "9", "-o", filepath.Join(dir, "x.json")}, // 9 stages for 5 layers
		{"check", filepath.Join(dir, "missing.json")},
	} {
		if code := run(args); code != 1 {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.json")); !os.IsNotExist(err) {
		t.Errorf("a failed plan left x.json behind")
	}
	if code := run([]string{"plan", storiesGGUF, "--max-stage-bytes", "lots"}); code != 2 {
		t.Errorf("bad --max-stage-bytes: exit %d, want 2", code)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"2GiB": 2 << 30, "1500MiB": 1500 << 20, "3GB": 3e9, "4096": 4096, "1.5 KiB": 1536} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1", "0", "2TB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) accepted", in)
		}
	}
}

func TestSummarize(t *testing.T) {
	in := []string{"hidden_states_0", "attention_mask", "past_key_4_in", "past_value_4_in", "past_key_5_in", "past_value_5_in", "past_conv_6_in"}
	want := []string{"hidden_states_0", "attention_mask", "past_key_{4-5}_in", "past_value_{4-5}_in", "past_conv_6_in"}
	if got := summarize(in); !slices.Equal(got, want) {
		t.Errorf("summarize = %v, want %v", got, want)
	}
}
