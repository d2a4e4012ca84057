package runtime

import (
	"context"
	"fmt"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// BenchmarkSpeculate measures tokens/s of 64 generated tokens: plain greedy
// against speculative decoding of a 12-layer Q8_0 llama (hidden 512) with
// its own first layer (same embeddings and head) as draft, and with the
// model drafting for itself (every proposal accepted, but the draft costs
// a full model).
func BenchmarkSpeculate(b *testing.B) {
	cfg := benchLlama(false)
	cfg.Layers = 12
	cfg.LayerKinds = make([]model.LayerKind, cfg.Layers)
	tm := fastRandomModel(b, cfg, gguf.Q8_0)
	target := newEngine(b, tm, Options{Context: 512})
	trunc := truncatedDraft(b, tm, 1)
	prompt := randomTokens(16, cfg.VocabSize, 3)
	const n = 64
	b.Run("greedy", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := target.Greedy(context.Background(), prompt, n); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tok/s")
	})
	for _, dc := range []struct {
		name  string
		draft *Engine
	}{{"layer0", trunc}, {"self", target}} {
		for k := 1; k <= 4; k++ {
			b.Run(fmt.Sprintf("%s/K=%d", dc.name, k), func(b *testing.B) {
				var st SpecStats
				for i := 0; i < b.N; i++ {
					d, _ := NewDraftModel(target, dc.draft)
					_, s, err := target.Speculate(context.Background(), d, prompt, n, k)
					if err != nil {
						b.Fatal(err)
					}
					st = s
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tok/s")
				b.ReportMetric(st.AcceptanceLength(), "accepted/window")
				b.ReportMetric(st.TargetCallsPerToken(), "calls/tok")
			})
		}
	}
}
