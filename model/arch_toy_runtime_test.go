package model_test

import (
	"context"
	"math"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/synth"
)

// The runtime knows architectures only by their features: the toy
// architecture of arch_toy_test.go decodes, and gives bit for bit the
// logits of the same weights as qwen3, whose features it shares.
func TestSixthArchitectureDecodes(t *testing.T) {
	cfg, unregister := model.RegisterToy()
	defer unregister()
	logits := func(cfg model.Config) [][]float32 {
		t.Helper()
		m, err := synth.Model(cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		e, err := runtime.New(m, runtime.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Logits(context.Background(), []int32{1, 5, 9, 3})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	toy := logits(cfg)
	cfg.Arch = model.Qwen3
	qwen3 := logits(cfg)
	if len(toy) != 4 || len(toy[0]) != cfg.VocabSize {
		t.Fatalf("toy logits %d×%d, want 4×%d", len(toy), len(toy[0]), cfg.VocabSize)
	}
	for i := range toy {
		for j := range toy[i] {
			if math.Float32bits(toy[i][j]) != math.Float32bits(qwen3[i][j]) {
				t.Fatalf("logits[%d][%d]: toy %v, qwen3 %v", i, j, toy[i][j], qwen3[i][j])
			}
		}
	}
}
