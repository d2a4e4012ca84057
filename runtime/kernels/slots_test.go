package kernels

import (
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
