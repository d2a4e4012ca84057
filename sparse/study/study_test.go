package study_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/sparse"
	"github.com/qnnprep/qnnprep/sparse/study"
	"github.com/qnnprep/qnnprep/synth"
)

// TestStudyChannels: removing a quarter of a synthetic llama's hidden
// channels writes a variant whose zeros survive quantization, and the
// physically pruned model decodes exactly like the zeroed one against the
// golden recorded from the dense model.
func TestStudyChannels(t *testing.T) {
	m, err := synth.Model(synth.Config(model.Llama, false), 42)
	if err != nil {
		t.Fatal(err)
	}
	pat, err := sparse.ParsePattern("channel")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := study.Options{
		Source: "synth", Out: filepath.Join(dir, "v.gguf"), PrunedOut: filepath.Join(dir, "v.pruned.gguf"),
		Sparse:     sparse.Options{Pattern: pat, Sparsity: 0.25},
		Prompts:    []golden.Prompt{{Name: "a", IDs: []int32{1, 5, 9}}, {Name: "b", IDs: []int32{1, 300}}},
		Steps:      6,
		SaveGolden: filepath.Join(dir, "golden.json"),
		Quantize:   quantize.Options{Recipe: quantize.Recipes["keep"], Workers: 1},
		Threads:    1,
	}
	res, err := study.Run(context.Background(), m, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Effective != 0.25 || res.Sparsity.StructureSparsity != 0.25 {
		t.Errorf("effective sparsity %v, structures %v; want 0.25", res.Effective, res.Sparsity.StructureSparsity)
	}
	if res.Golden != "recorded from synth" || res.Baseline != nil {
		t.Errorf("golden %q, baseline %+v: want a recorded golden and no baseline for keep", res.Golden, res.Baseline)
	}
	p := res.Pruned
	if p == nil || p.Output != o.PrunedOut || p.Config.Hidden != 48 || p.SavedBytes <= 0 {
		t.Fatalf("pruned %+v", p)
	}
	if p.Quality.Top1 != res.Quality.Top1 || p.Quality.Matched != res.Quality.Matched {
		t.Errorf("pruned quality %+v, zeroed %+v", p.Quality, res.Quality)
	}
	for _, f := range []string{o.Out, o.PrunedOut, o.SaveGolden} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	// The saved golden is the dense model's: it verifies the dense model
	// exactly.
	g, err := golden.Read(o.SaveGolden)
	if err != nil {
		t.Fatal(err)
	}
	var f study.Findings
	s, err := study.Verify(context.Background(), m, g, 1, &f, "dense")
	if err != nil {
		t.Fatal(err)
	}
	if s.Top1 != 1 || s.MatchFraction != 1 || len(f.Divergence) != 0 {
		t.Errorf("dense against its own golden: %+v, %v", s, f.Divergence)
	}
}
