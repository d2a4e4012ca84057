package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit"
)

var storiesGGUF = testkit.File("stories260K/stories260K-llamacpp.gguf")

func TestPlanCheckCommands(t *testing.T) {
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Fatalf("fixture missing: %v", err)
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
	for _, in := range []string{"", "GiB", "-1", "0", "2TB", "NaN", "NaNGiB", "Inf", "0.5B"} {
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

// plan --container sizes stages in that container: the same q1 qmodel has
// the same qmodel bytes, but twice the code bytes in 8 bits; and
// --max-stage-bytes balances by device bytes, so a limit the qmodel's
// bytes fit in one stage still splits.
func TestPlanContainer(t *testing.T) {
	dir := t.TempDir()
	q := filepath.Join(dir, "q1.gguf")
	if code := run([]string{"quantize", synthLlamaGGUF(t), q, "--recipe", "q1"}); code != 0 {
		t.Fatalf("quantize exit %d", code)
	}
	plan := func(args ...string) *shard.Plan {
		t.Helper()
		out := filepath.Join(dir, "plan.json")
		if code := run(append([]string{"plan", q, "--ar", "32,1", "--cl", "128", "-o", out}, args...)); code != 0 {
			t.Fatalf("plan %v: exit %d", args, code)
		}
		p, err := shard.ReadPlan(out)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sum := func(p *shard.Plan) (dev, qm int64) {
		for _, s := range p.Stages {
			dev, qm = dev+s.Bytes, qm+s.QModelBytes
		}
		return dev, qm
	}
	p4, p8 := plan("--stages", "1"), plan("--stages", "1", "--container", "8bit")
	d4, q4 := sum(p4)
	d8, q8 := sum(p8)
	if p4.Container != shard.Container4Bit || p8.Container != shard.Container8Bit || q4 != q8 || d4 <= q4 || d8 <= d4 {
		t.Errorf("4bit: %d device, %d qmodel bytes; 8bit: %d, %d", d4, q4, d8, q8)
	}
	// A limit above the whole qmodel but below the device bytes.
	limit := (q4 + d4) / 2
	bal := plan("--max-stage-bytes", fmt.Sprint(limit))
	if len(bal.Stages) < 2 {
		t.Errorf("--max-stage-bytes %d (qmodel %d, device %d bytes): %d stage(s)", limit, q4, d4, len(bal.Stages))
	}
	for _, s := range bal.Stages {
		if s.Bytes > limit {
			t.Errorf("stage %d: %d device bytes over %d", s.Index, s.Bytes, limit)
		}
	}
	if code := run([]string{"plan", q, "--container", "2bit", "-o", filepath.Join(dir, "x.json")}); code != 2 {
		t.Errorf("--container 2bit: exit %d, want 2", code)
	}
}
