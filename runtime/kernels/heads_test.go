package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// headValue draws from normal values, tiny and huge ones, signed zeros and
// the non-finite values, so that the tests reach −0 sums, overflow and
// NaN.
func headValue(r *rand.Rand) float32 {
	switch r.IntN(16) {
	case 0:
		return float32(math.Copysign(0, -1))
	case 1:
		return 0
	case 2:
		return float32(math.Inf(1 - 2*r.IntN(2)))
	case 3:
		return float32(math.NaN())
	case 4:
		return float32(r.NormFloat64() * 1e30)
	case 5:
		return float32(r.NormFloat64() * 1e-30)
	}
	return float32(r.NormFloat64())
}

// TestDotHeadsMatchesDot: every score DotHeads gives is Dot's, bit for bit
// (NaN for NaN), for the head sizes the assembly takes and others, for
// vectors of ordinary values, of edge values, and of signed zeros only
// (where the sign of a zero sum depends on where the +0 start goes: with
// every product −0, Dot's sum is +0).
func TestDotHeadsMatchesDot(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{64, 128, 32, 8, 40, 96, 256} {
		for _, kind := range []string{"normal", "edges", "zeros", "negative products"} {
			t.Run(fmt.Sprintf("%d/%s", n, kind), func(t *testing.T) {
				for iter := range 50 {
					tokens := 1 + iter%5
					stride := n + r.IntN(3)
					value := func() float32 {
						switch kind {
						case "edges":
							return headValue(r)
						case "zeros", "negative products":
							return float32(math.Copysign(0, float64(r.IntN(2)*2-1)))
						}
						return float32(r.NormFloat64())
					}
					k := make([]float32, n)
					for i := range k {
						k[i] = value()
					}
					q := make([]float32, tokens*HeadGroup*stride)
					for i := range q {
						q[i] = value()
						if kind == "negative products" {
							// Every product −0: Dot gives +0.
							q[i] = float32(math.Copysign(0, -float64(k[i%stride%n])))
							if i%stride >= n {
								q[i] = 1
							}
						}
					}
					qt := make([]float32, tokens*n*HeadGroup)
					TransposeHeads(qt, q, tokens, n, stride)
					outStride := HeadGroup + r.IntN(3)
					out := make([]float32, (tokens-1)*outStride+HeadGroup)
					DotHeads(k, qt, tokens, out, outStride)
					for ti := range tokens {
						for h := range HeadGroup {
							v := q[(ti*HeadGroup+h)*stride : (ti*HeadGroup+h)*stride+n]
							if got, want := out[ti*outStride+h], Dot(k, v); !blocks.SameFloat(got, want) {
								t.Fatalf("token %d head %d: %v (%#08x), Dot %v (%#08x)", ti, h, got, math.Float32bits(got), want, math.Float32bits(want))
							}
						}
					}
				}
			})
		}
	}
}

func TestDotHeadsBadShapes(t *testing.T) {
	k := make([]float32, 64)
	qt := make([]float32, 2*64*HeadGroup)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"qt short", func() { DotHeads(k, qt[:len(qt)-1], 2, make([]float32, 16), 8) }},
		{"out short", func() { DotHeads(k, qt, 2, make([]float32, 15), 8) }},
		{"stride below group", func() { DotHeads(k, qt, 2, make([]float32, 16), 7) }},
		{"transpose beyond q", func() { TransposeHeads(qt, make([]float32, 64*HeadGroup), 2, 64, 64) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			c.f()
		}()
	}
}

// BenchmarkDotHeads compares the scores of one key against 32 tokens'
// eight heads (a prompt's GQA group) with DotRows, which computes them
// eight at a time in Dot's element-lane form.
func BenchmarkDotHeads(b *testing.B) {
	for _, n := range []int{64, 128} {
		const tokens = 32
		r := rand.New(rand.NewPCG(1, 2))
		k := make([]float32, n)
		q := make([]float32, tokens*HeadGroup*n)
		for i := range k {
			k[i] = float32(r.NormFloat64())
		}
		for i := range q {
			q[i] = float32(r.NormFloat64())
		}
		qt := make([]float32, len(q))
		TransposeHeads(qt, q, tokens, n, n)
		out := make([]float32, tokens*HeadGroup)
		b.Run(fmt.Sprintf("%d/heads", n), func(b *testing.B) {
			for b.Loop() {
				DotHeads(k, qt, tokens, out, HeadGroup)
			}
			b.ReportMetric(float64(tokens*HeadGroup*n*b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
		b.Run(fmt.Sprintf("%d/rows", n), func(b *testing.B) {
			for b.Loop() {
				for ti := range tokens {
					DotRows(k, q[ti*HeadGroup*n:(ti+1)*HeadGroup*n], out[ti*HeadGroup:(ti+1)*HeadGroup])
				}
			}
			b.ReportMetric(float64(tokens*HeadGroup*n*b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}
