package runtime

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// BenchmarkDepth measures decode (tg, one token) and prompt processing
// (pp, 64 tokens in one call) with the cache already holding depth
// positions, on the Q1_0 llama of BenchmarkDecode (QNNPREP_BENCH_700M=1:
// the 700M one). The cache is filled with random K and V rather than by
// a prefill: attention costs the same whatever the values, and filling
// 2048 positions of the 700M model by decoding would take minutes.
func BenchmarkDepth(b *testing.B) {
	big := os.Getenv("QNNPREP_BENCH_700M") != ""
	threads := benchThreads(b)
	for _, depth := range []int{0, 2048} {
		for _, n := range []int{1, 64} {
			b.Run(depthName(n, depth), func(b *testing.B) {
				benchDepth(b, cachedModel(b, big, gguf.Q1_0), threads, depth, n)
			})
		}
	}
}

// BenchmarkDepthKVF16 is BenchmarkDepth with --kv-f16's attention
// (flashBlock).
func BenchmarkDepthKVF16(b *testing.B) {
	big := os.Getenv("QNNPREP_BENCH_700M") != ""
	threads := benchThreads(b)
	for _, depth := range []int{0, 2048} {
		for _, n := range []int{1, 64} {
			b.Run(depthName(n, depth), func(b *testing.B) {
				benchDepthKV(b, cachedModel(b, big, gguf.Q1_0), threads, depth, n, true)
			})
		}
	}
}

// BenchmarkDepthGQA is BenchmarkDepth's attention on the query/KV head
// layouts of the models users bring, on four layers of the 700M body
// (Q1_0 weights, so that attention is most of the time at depth 2048):
// GQA groups of 8 (the 700M model's), 4 (Llama 3.x 8B, Qwen3-8B) and 2,
// head sizes 64 and 128.
func BenchmarkDepthGQA(b *testing.B) {
	threads := benchThreads(b)
	for _, g := range []struct{ heads, kv, d int }{{32, 4, 64}, {16, 4, 128}, {32, 8, 64}, {16, 8, 128}} {
		cfg := benchLlama(true)
		cfg.Layers, cfg.LayerKinds = 4, cfg.LayerKinds[:4]
		cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.RopeDim = g.heads, g.kv, g.d, g.d
		cfg.ContextLength = 4096
		m := fastRandomModel(b, cfg, gguf.Q1_0)
		for _, depth := range []int{0, 2048} {
			for _, n := range []int{1, 64} {
				b.Run(fmt.Sprintf("group%d-d%d/%s", g.heads/g.kv, g.d, depthName(n, depth)), func(b *testing.B) {
					benchDepth(b, m, threads, depth, n)
				})
			}
		}
	}
}

func depthName(n, depth int) string {
	if n > 1 {
		return fmt.Sprintf("pp%d/depth=%d", n, depth)
	}
	return fmt.Sprintf("tg/depth=%d", depth)
}

// benchDepth times Forward of n tokens after depth cached positions.
func benchDepth(b *testing.B, m *model.Model, threads, depth, n int) {
	benchDepthKV(b, m, threads, depth, n, false)
}

// benchDepthKV is benchDepth, with Options.KVF16 (llama.cpp's F16-KV
// flash attention, the cache rounded to binary16) when kvF16.
func benchDepthKV(b *testing.B, m *model.Model, threads, depth, n int, kvF16 bool) {
	e, err := New(m, Options{Threads: threads, Context: depth + n, KVF16: kvF16})
	if err != nil {
		b.Fatal(err)
	}
	st := e.NewState()
	fillKV(st, depth)
	if kvF16 {
		for i := range st.layers {
			for h := range st.layers[i].k {
				roundF16(st.layers[i].k[h])
				roundF16(st.layers[i].v[h])
			}
		}
	}
	toks := randomTokens(n, 512, 3)
	b.ResetTimer()
	c0 := cpubench.Process()
	for i := 0; i < b.N; i++ {
		if err := st.Truncate(depth); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Forward(toks); err != nil {
			b.Fatal(err)
		}
	}
	reportSpeed(b, b.N*n, cpubench.Process()-c0, threads)
}

// fillKV sets every layer's cache to depth positions of random K and V
// (attention-only models), with room for the benchmark's tokens after
// them (up to the engine's context): a cache that had to grow on the
// first Forward would add its copy to every iteration's time.
func fillKV(st *State, depth int) {
	rng := rand.New(rand.NewPCG(5, 6))
	d := st.e.cfg.HeadDim
	room := max(depth, st.e.ctxLen) * d
	for i := range st.layers {
		ls := &st.layers[i]
		for h := range ls.k {
			ls.k[h], ls.v[h] = make([]float32, depth*d, room), make([]float32, depth*d, room)
			for j := range ls.k[h] {
				ls.k[h][j] = float32(rng.NormFloat64())
				ls.v[h][j] = float32(rng.NormFloat64())
			}
		}
		ls.n = depth
	}
}
