package runtime

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
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
			name := fmt.Sprintf("tg/depth=%d", depth)
			if n > 1 {
				name = fmt.Sprintf("pp%d/depth=%d", n, depth)
			}
			b.Run(name, func(b *testing.B) {
				e, err := New(cachedModel(b, big, gguf.Q1_0), Options{Threads: threads, Context: depth + n})
				if err != nil {
					b.Fatal(err)
				}
				st := e.NewState()
				fillKV(st, depth)
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
			})
		}
	}
}

// fillKV sets every layer's cache to depth positions of random K and V
// (attention-only models).
func fillKV(st *State, depth int) {
	rng := rand.New(rand.NewPCG(5, 6))
	kv := st.e.cfg.KVHeads * st.e.cfg.HeadDim
	for i := range st.layers {
		ls := &st.layers[i]
		ls.k, ls.v = make([]float32, depth*kv), make([]float32, depth*kv)
		for j := range ls.k {
			ls.k[j] = float32(rng.NormFloat64())
			ls.v[j] = float32(rng.NormFloat64())
		}
		ls.n = depth
	}
}
