package runtime

import (
	"fmt"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// TestWeightsHeldOnce checks that an engine on a GGUF file reads every
// weight matrix where the file's mapping holds it, with no private copy,
// and that a second engine on the same model shares the same bytes.
func TestWeightsHeldOnce(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q1_0, gguf.F16, gguf.BF16, gguf.F32} {
		t.Run(typ.String(), func(t *testing.T) {
			cfg := synth.Config(model.Llama, typ == gguf.Q1_0)
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := synth.WriteGGUF(p, cfg, 1, typ); err != nil {
				t.Fatal(err)
			}
			m, err := model.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			e1, err := New(m, Options{Context: 16})
			if err != nil {
				t.Fatal(err)
			}
			e2, err := New(m, Options{Context: 16})
			if err != nil {
				t.Fatal(err)
			}
			check := func(name string, w1, w2 *matrix) {
				t.Helper()
				b, err := m.Tensor(name).Data()
				if err != nil {
					t.Fatal(err)
				}
				if unsafe.SliceData(w1.data) != unsafe.SliceData(b) || unsafe.SliceData(w2.data) != unsafe.SliceData(b) {
					t.Errorf("%s: the engine reads a copy, not the model's bytes", name)
				}
			}
			check("token_embd.weight", e1.embd, e2.embd)
			for i := range e1.layers {
				l1, l2 := &e1.layers[i], &e2.layers[i]
				for _, w := range []struct {
					name   string
					w1, w2 *matrix
				}{{"attn_q", l1.wq, l2.wq}, {"attn_k", l1.wk, l2.wk}, {"attn_v", l1.wv, l2.wv}, {"attn_output", l1.wo, l2.wo},
					{"ffn_gate", l1.wgate, l2.wgate}, {"ffn_up", l1.wup, l2.wup}, {"ffn_down", l1.wdown, l2.wdown}} {
					check(fmt.Sprintf("blk.%d.%s.weight", i, w.name), w.w1, w.w2)
				}
			}
		})
	}
}

// TestDecodeWeights: the bytes one decoded token streams are every
// layer's matrices then the head, each once and as the model's own bytes;
// the token-embedding table is among them only as a tied model's head.
func TestDecodeWeights(t *testing.T) {
	for _, arch := range []model.Arch{model.Llama, model.Qwen3} { // qwen3: tied embeddings
		t.Run(string(arch), func(t *testing.T) {
			cfg := synth.Config(arch, false)
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := synth.WriteGGUF(p, cfg, 1, gguf.Q8_0); err != nil {
				t.Fatal(err)
			}
			m, err := model.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			e, err := New(m, Options{Context: 16})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for i := range cfg.Layers {
				for _, w := range []string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"} {
					want = append(want, fmt.Sprintf("blk.%d.%s.weight", i, w))
				}
			}
			if cfg.TiedEmbeddings {
				want = append(want, "token_embd.weight")
			} else {
				want = append(want, "output.weight")
			}
			got := e.DecodeWeights()
			if len(got) != len(want) {
				t.Fatalf("%d spans, want %d (%v)", len(got), len(want), want)
			}
			for i, name := range want {
				b, err := m.Tensor(name).Data()
				if err != nil {
					t.Fatal(err)
				}
				if unsafe.SliceData(got[i]) != unsafe.SliceData(b) || len(got[i]) != len(b) {
					t.Errorf("span %d is not %s's bytes", i, name)
				}
			}
		})
	}
}
