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

// headSlotKernels are the DotHeadsSlots kernels this CPU runs (the Go
// one, and those slots_amd64_test.go adds).
var headSlotKernels = []headSlotKernel{{"go", dotHeadsSlotsGo}}

type headSlotKernel struct {
	name string
	f    func(n int, k []float32, kstride, d int, qt []float32, tokens int, out []float32, ostride int)
}

// checkHeadsSlots runs f on n slots and compares the whole of out (the
// scores and the gaps between them, which must stay as they were) with
// one dotHeadsGo call per slot.
func checkHeadsSlots(t *testing.T, name string, f func(n int, k []float32, kstride, d int, qt []float32, tokens int, out []float32, ostride int),
	n int, k []float32, kstride, d int, qt []float32, tokens, ostride int) {
	t.Helper()
	out := make([]float32, (n-1)*ostride+tokens*HeadGroup+1)
	for i := range out {
		out[i] = float32(i) + 0.5
	}
	want := append([]float32(nil), out...)
	for j := range n {
		dotHeadsGo(k[j*kstride:j*kstride+d], qt, tokens, want[j*ostride:], HeadGroup)
	}
	f(n, k, kstride, d, qt, tokens, out, ostride)
	for i := range out {
		if !blocks.SameFloat(out[i], want[i]) {
			t.Fatalf("%s n=%d tokens=%d d=%d kstride=%d ostride=%d: out[%d] = %v (%#08x), DotHeads %v (%#08x)",
				name, n, tokens, d, kstride, ostride, i, out[i], math.Float32bits(out[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestDotHeadsSlotsMatchesDotHeads compares every DotHeadsSlots kernel
// with one DotHeads per slot, bit for bit, over head sizes with and
// without assembly, token counts, strided keys and scores, and special
// values (signed zeros, huge, infinite, NaN).
func TestDotHeadsSlotsMatchesDotHeads(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, kern := range headSlotKernels {
		for _, d := range []int{64, 128, 8, 32, 40, 96} {
			for _, tokens := range []int{1, 2, 5} {
				for _, n := range []int{1, 2, 17, 40} {
					edges := (n+tokens)%2 == 0
					kstride := d + r.IntN(3)*8 + r.IntN(2)
					ostride := tokens*HeadGroup + r.IntN(3)
					k := make([]float32, (n-1)*kstride+d)
					qt := make([]float32, tokens*d*HeadGroup+r.IntN(2))
					for _, x := range [][]float32{k, qt} {
						for i := range x {
							x[i] = float32(r.NormFloat64())
							if edges {
								x[i] = headValue(r)
							}
						}
					}
					checkHeadsSlots(t, kern.name, kern.f, n, k, kstride, d, qt, tokens, ostride)
				}
			}
		}
	}
	for name, f := range map[string]func(){
		"short k":   func() { DotHeadsSlots(2, make([]float32, 15), 8, 8, make([]float32, 64), 1, make([]float32, 16), 8) },
		"short qt":  func() { DotHeadsSlots(2, make([]float32, 16), 8, 8, make([]float32, 63), 1, make([]float32, 16), 8) },
		"short out": func() { DotHeadsSlots(2, make([]float32, 16), 8, 8, make([]float32, 64), 1, make([]float32, 15), 8) },
		"ostride":   func() { DotHeadsSlots(2, make([]float32, 16), 8, 8, make([]float32, 128), 2, make([]float32, 32), 15) },
		"kstride":   func() { DotHeadsSlots(2, make([]float32, 16), 7, 8, make([]float32, 64), 1, make([]float32, 16), 8) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
