package runtime

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// TestHFEqualsGGUF: the Hugging Face checkpoint and the GGUF of the same
// synthetic weights decode to the same greedy ids with bit-identical
// logits, on every architecture (package model makes the HF layout
// canonical: llama q/k permutation, zero-centred norms, A_log, grouped
// value heads, Qwen3-Next's fused projections; the runtime sees one form).
func TestHFEqualsGGUF(t *testing.T) {
	for _, arch := range archs {
		t.Run(string(arch), func(t *testing.T) {
			cfg := synth.Config(arch, false)
			dir := t.TempDir()
			hfDir, ggufPath := filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
			if err := synth.WriteHF(hfDir, cfg, 3, 2); err != nil {
				t.Fatal(err)
			}
			if err := synth.WriteGGUF(ggufPath, cfg, 3, gguf.F32); err != nil {
				t.Fatal(err)
			}
			prompt := []int32{1, 300, 301, 302}
			var ids [2][]int32
			var logits [2][][]float32
			for i, path := range []string{hfDir, ggufPath} {
				m, err := model.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				e := newEngine(t, m, Options{})
				if ids[i], err = e.Greedy(context.Background(), prompt, 24); err != nil {
					t.Fatal(err)
				}
				if logits[i], err = e.Logits(context.Background(), append(append([]int32(nil), prompt...), ids[i]...)); err != nil {
					t.Fatal(err)
				}
			}
			for j := range ids[0] {
				if ids[0][j] != ids[1][j] {
					t.Fatalf("token %d: HF %d, GGUF %d\nHF   %v\nGGUF %v", j, ids[0][j], ids[1][j], ids[0], ids[1])
				}
			}
			for j := range logits[0] {
				if err := sameBits(logits[0][j], logits[1][j]); err != nil {
					t.Fatalf("position %d: %v", j, err)
				}
			}
			distinct := map[int32]bool{}
			for _, id := range ids[0] {
				distinct[id] = true
			}
			if len(distinct) < 3 {
				t.Errorf("degenerate decode %v", ids[0])
			}
		})
	}
}
