package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// TestAxpySlotsMatchesAxpyRows compares AxpySlots with one AxpyRows call
// per slot, bit for bit, over head sizes with and without the vector
// path, strided coefficient and value rows, and special values.
// Every kernel this CPU runs is compared, not only the one init selected.
func TestAxpySlotsMatchesAxpyRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, k := range slotKernels {
		for _, d := range []int{8, 32, 64, 96, 128} {
			for _, m := range []int{1, 3, 4, 8, 9} {
				for _, n := range []int{1, 2, 17, 130} {
					cstride, vstride := m+r.IntN(3), d+8*r.IntN(3)
					c := randomF32(r, (n-1)*cstride+m, n == 17)
					v := randomF32(r, (n-1)*vstride+d, n == 17)
					ys := randomF32(r, m*d, false)
					want := append([]float32(nil), ys...)
					for j := range n {
						axpyRowsGo(c[j*cstride:j*cstride+m], v[j*vstride:j*vstride+d], want)
					}
					k.f(n, c, cstride, v, vstride, ys, m)
					for i := range ys {
						if !blocks.SameFloat(ys[i], want[i]) {
							t.Fatalf("%s d=%d m=%d n=%d [%d]: %v, AxpyRows %v", k.name, d, m, n, i, ys[i], want[i])
						}
					}
				}
			}
		}
	}
	for name, f := range map[string]func(){
		"short c":   func() { AxpySlots(2, make([]float32, 3), 2, make([]float32, 16), 8, make([]float32, 16), 2) },
		"short v":   func() { AxpySlots(2, make([]float32, 4), 2, make([]float32, 15), 8, make([]float32, 16), 2) },
		"ragged ys": func() { AxpySlots(1, make([]float32, 4), 2, make([]float32, 16), 8, make([]float32, 15), 2) },
		"cstride":   func() { AxpySlots(2, make([]float32, 4), 1, make([]float32, 16), 8, make([]float32, 16), 2) },
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

// slotKernels are the AxpySlots kernels this CPU runs (the Go one, and
// those slots_amd64_test.go adds).
var slotKernels = []slotKernel{{"go", axpySlotsGo}}

type slotKernel struct {
	name string
	f    func(n int, c []float32, cstride int, v []float32, vstride int, ys []float32, m int)
}

func BenchmarkAxpySlots(b *testing.B) {
	const n, m, d, stride = 2048, 8, 64, 256
	r := rand.New(rand.NewPCG(1, 1))
	c, v := randomF32(r, n*m, false), randomF32(r, n*stride, false)
	ys := make([]float32, m*d)
	b.Run("slots", func(b *testing.B) {
		for b.Loop() {
			for j := 0; j < n; j += 128 { // tiles that stay in L1, as attention calls it
				AxpySlots(128, c[j*m:], m, v[j*stride:], stride, ys, m)
			}
		}
		b.ReportMetric(float64(n*m*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			for j := range n {
				AxpyRows(c[j*m:(j+1)*m], v[j*stride:j*stride+d], ys)
			}
		}
		b.ReportMetric(float64(n*m*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
}

// scoreSlotKernels are the DotRowsSlots kernels this CPU runs (the Go
// one, and those slots_amd64_test.go adds).
var scoreSlotKernels = []scoreSlotKernel{{"go", dotRowsSlotsGo}}

type scoreSlotKernel struct {
	name string
	f    func(n int, k []float32, kstride, d int, q []float32, qstride, tokens, m int, out []float32, ostride int)
}

// checkRowsSlots runs f on n slots × tokens × m rows of d and compares
// the whole of out (the scores and the gaps between them, which must stay
// as they were) with one dotRowsGo call per slot and token.
func checkRowsSlots(t *testing.T, name string, f func(n int, k []float32, kstride, d int, q []float32, qstride, tokens, m int, out []float32, ostride int),
	n int, k []float32, kstride, d int, q []float32, qstride, tokens, m int, ostride int) {
	t.Helper()
	out := make([]float32, (n-1)*ostride+tokens*m+1)
	for i := range out {
		out[i] = float32(i) + 0.5
	}
	want := append([]float32(nil), out...)
	for j := range n {
		for ti := range tokens {
			o := j*ostride + ti*m
			dotRowsGo(k[j*kstride:j*kstride+d], q[ti*qstride:ti*qstride+m*d], want[o:o+m])
		}
	}
	f(n, k, kstride, d, q, qstride, tokens, m, out, ostride)
	for i := range out {
		if !blocks.SameFloat(out[i], want[i]) {
			t.Fatalf("%s n=%d tokens=%d m=%d d=%d kstride=%d qstride=%d ostride=%d: out[%d] = %v (%#08x), DotRows %v (%#08x)",
				name, n, tokens, m, d, kstride, qstride, ostride, i, out[i], math.Float32bits(out[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestDotRowsSlotsMatchesDotRows compares every DotRowsSlots kernel with
// one DotRows per slot and token, bit for bit, over head sizes with and
// without assembly, GQA groups, strided keys, queries and scores, and
// special values (signed zeros, subnormals, huge, infinite, NaN).
func TestDotRowsSlotsMatchesDotRows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, kern := range scoreSlotKernels {
		for _, d := range []int{8, 32, 40, 64, 96, 128, 256} {
			for _, m := range []int{1, 2, 3, 4, 7, 8} {
				for _, tokens := range []int{1, 3} {
					for _, n := range []int{1, 2, 17, 40} {
						edges := (n+m)%2 == 0
						kstride := d + r.IntN(3)*8 + r.IntN(2)
						qstride := m*d + r.IntN(2)*d
						ostride := tokens*m + r.IntN(3)
						k := make([]float32, (n-1)*kstride+d)
						q := make([]float32, (tokens-1)*qstride+m*d)
						for _, x := range [][]float32{k, q} {
							for i := range x {
								x[i] = float32(r.NormFloat64())
								if edges {
									x[i] = headValue(r)
								}
							}
						}
						checkRowsSlots(t, kern.name, kern.f, n, k, kstride, d, q, qstride, tokens, m, ostride)
					}
				}
			}
		}
	}
	for name, f := range map[string]func(){
		"short k": func() {
			DotRowsSlots(2, make([]float32, 15), 8, 8, make([]float32, 16), 16, 1, 2, make([]float32, 4), 2)
		},
		"short q": func() {
			DotRowsSlots(2, make([]float32, 16), 8, 8, make([]float32, 15), 16, 1, 2, make([]float32, 4), 2)
		},
		"short out": func() {
			DotRowsSlots(2, make([]float32, 16), 8, 8, make([]float32, 16), 16, 1, 2, make([]float32, 3), 2)
		},
		"ostride": func() {
			DotRowsSlots(2, make([]float32, 16), 8, 8, make([]float32, 32), 16, 2, 2, make([]float32, 8), 3)
		},
		"kstride": func() {
			DotRowsSlots(2, make([]float32, 16), 7, 8, make([]float32, 16), 16, 1, 2, make([]float32, 4), 2)
		},
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

// BenchmarkDotRowsSlots scores 2048 cache slots for a GQA group of 4
// heads of 128 (Llama 3.x 8B's decoding), one KV head of four in each
// slot's row: one DotRowsSlots call against a Prefetch and a DotRows
// call per slot, as attention called them before.
func BenchmarkDotRowsSlots(b *testing.B) {
	const n, m, d, stride = 2048, 4, 128, 512
	r := rand.New(rand.NewPCG(1, 1))
	k, q := randomF32(r, n*stride, false), randomF32(r, m*d, false)
	out := make([]float32, n*m)
	b.Run("slots", func(b *testing.B) {
		for b.Loop() {
			DotRowsSlots(n, k, stride, d, q, m*d, 1, m, out, m)
		}
		b.ReportMetric(float64(n*m*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			for j := range n {
				if jp := j + 16; jp < n {
					Prefetch(k[jp*stride : jp*stride+d])
				}
				DotRows(k[j*stride:j*stride+d], q, out[j*m:(j+1)*m])
			}
		}
		b.ReportMetric(float64(n*m*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
}
