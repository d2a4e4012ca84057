package bench

// Benchmarks of the runtime's hot paths that runtime/kernels, int8 and
// quant1bit do not cover (they time single dot products): a whole matrix
// × vector product per weight type with the runtime's row split over
// threads, attention by depth, and one Gated DeltaNet step. They go
// through the public runtime API on small synthetic models shaped like
// the 700M llama's matrices and Qwen3.5-0.8B's DeltaNet layers.

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/synth"
)

func openSynth(b *testing.B, cfg model.Config, typ gguf.Type) *model.Model {
	b.Helper()
	p := filepath.Join(b.TempDir(), "m.gguf")
	if err := synth.WriteGGUF(p, cfg, 3, typ); err != nil {
		b.Fatal(err)
	}
	m, err := model.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// llamaShape is one layer of the 700M llama (hidden 2048, 32 heads of 64,
// 4 KV heads) with a tiny FFN, and a vocabulary of vocab.
func llamaShape(vocab, ctx int) model.Config {
	c := config700M()
	c.Layers, c.FFN, c.VocabSize, c.ContextLength = 1, 128, vocab, ctx
	c.LayerKinds = make([]model.LayerKind, 1)
	return c
}

// BenchmarkMatvec times one 2048 → 5632 matrix × vector product (the
// shape of the 700M llama's ffn_gate/ffn_up) per weight type, through the
// runtime's output head (final norm + one matmul, activations rounded as
// for that type); GB/s counts the weight bytes read.
func BenchmarkMatvec(b *testing.B) {
	for _, typ := range []gguf.Type{gguf.F16, gguf.Q8_0, gguf.Q1_0} {
		cfg := llamaShape(5632, 64)
		m := openSynth(b, cfg, typ)
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", typ, th), func(b *testing.B) {
				e, err := runtime.New(m, runtime.Options{Threads: th})
				if err != nil {
					b.Fatal(err)
				}
				st := e.NewState()
				x := make([]float32, cfg.Hidden)
				for i := range x {
					x[i] = float32(i%7) - 3
				}
				logits := make([]float32, cfg.VocabSize)
				rb, _ := typ.RowBytes(int64(cfg.Hidden))
				bytes := rb * int64(cfg.VocabSize)
				b.SetBytes(bytes)
				b.ResetTimer()
				for range b.N {
					if err := st.Head(x, logits); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cfg.Hidden*cfg.VocabSize)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
			})
		}
	}
}

// BenchmarkAttention decodes one token through one 700M-shaped attention
// layer (Q1_0 projections, tiny FFN) with the context filled to each
// depth: the growth of ns/op with depth is the attention over the cache.
func BenchmarkAttention(b *testing.B) {
	cfg := llamaShape(512, 2048+2)
	m := openSynth(b, cfg, gguf.Q1_0)
	for _, kv := range []bool{false, true} {
		// KVF16 rounds the cache to binary16 and runs flash attention.
		e, err := runtime.New(m, runtime.Options{Threads: 2, KVF16: kv})
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range []int{0, 256, 1024, 2048} {
			b.Run(fmt.Sprintf("kvf16=%v/depth=%d", kv, d), func(b *testing.B) {
				st := e.NewState()
				if d > 0 {
					if _, err := st.Forward(tokens(cfg, d, 5, true)); err != nil {
						b.Fatal(err)
					}
				}
				tok := []int32{7}
				b.ResetTimer()
				for range b.N {
					if _, err := st.Forward(tok); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if err := st.Truncate(d); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}

// BenchmarkGDNStep decodes one token through one Gated DeltaNet layer
// shaped like Qwen3.5-0.8B's (hidden 1024, 16 key and 16 value heads of
// 128, conv kernel 4; Q8_0 weights, tiny FFN): the projections, the
// causal conv and the recurrent state update of 16×128×128 floats.
func BenchmarkGDNStep(b *testing.B) {
	cfg := synth.Config(model.Qwen35, true)
	cfg.Hidden, cfg.FFN, cfg.Layers = 1024, 128, 1
	cfg.SSMKeyHeads, cfg.SSMValueHeads, cfg.SSMKeyDim, cfg.SSMValueDim = 16, 16, 128, 128
	cfg.LayerKinds = []model.LayerKind{model.DeltaNet}
	cfg.ContextLength = 1 << 20
	m := openSynth(b, cfg, gguf.Q8_0)
	for _, th := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
			e, err := runtime.New(m, runtime.Options{Threads: th})
			if err != nil {
				b.Fatal(err)
			}
			st := e.NewState()
			tok := []int32{7}
			b.ResetTimer()
			for range b.N {
				if _, err := st.Forward(tok); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
