package runtime

import (
	"context"
	"fmt"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
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

// BenchmarkEagle3Depth measures one EAGLE-3 drafting step (Propose with
// K = 1 after a committed window) at depth: an 8B-style attention (32
// query heads, 8 KV heads of 128) over 2048 cached slots, with small
// matrices (hidden 512) so that the head's attention is what is timed.
func BenchmarkEagle3Depth(b *testing.B) {
	cfg := benchLlama(false)
	cfg.Layers = 2
	cfg.LayerKinds = make([]model.LayerKind, cfg.Layers)
	cfg.ContextLength = 4096
	target := newEngine(b, fastRandomModel(b, cfg, gguf.Q8_0), Options{Context: 4096, Threads: 1})
	ec := Eagle3Config{
		Hidden: cfg.Hidden, FFN: 1024, Heads: 32, KVHeads: 8, HeadDim: 128, DraftVocab: 64,
		TargetHidden: cfg.Hidden, ExtractLayers: DefaultExtractLayers(cfg.Layers), RMSEps: 1e-5, RopeTheta: 10000,
		ContextLength: 4096,
	}
	head, err := NewEagle3(target, ec, randomEagle3Tensors(b, target, ec, 7))
	if err != nil {
		b.Fatal(err)
	}
	const depth = 2048
	prompt := randomTokens(depth, cfg.VocabSize, 5)
	row := make([]float32, 3*cfg.Hidden)
	for i := range row {
		row[i] = float32(i%7) - 3
	}
	feats := make([][]float32, depth)
	for i := range feats {
		feats[i] = row
	}
	d := head.Drafter()
	if err := d.Start(prompt, feats); err != nil {
		b.Fatal(err)
	}
	last := prompt[depth-1]
	draft, err := d.Propose(last, 1)
	if err != nil {
		b.Fatal(err)
	}
	cpubench.Run(b, 0, func() {
		// Accept nothing: the window's one feature row is queued and the
		// next Propose runs one step at depth+1, then drops it again.
		if err := d.Commit(last, draft, 0, feats[:1]); err != nil {
			b.Fatal(err)
		}
		var err error
		if draft, err = d.Propose(last, 1); err != nil {
			b.Fatal(err)
		}
		if err := d.truncate(depth); err != nil {
			b.Fatal(err)
		}
		d.stable = depth
	})
}
