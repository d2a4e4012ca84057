package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// TestSoftmaxRowsMatchGo compares the vector forms with the Go loops, bit
// for bit, on scores with NaN, ±Inf and signed zeros, for row lengths
// with and without the vector path.
func TestSoftmaxRowsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, m := range []int{1, 7, 8, 16, 24, 64, 72} {
		for _, rows := range []int{1, 2, 5, 33} {
			s := randomF32(r, m*rows, true)
			v := randomF32(r, m, true)
			for i := range s {
				if r.IntN(9) == 0 { // ties and signed zeros for the max
					s[i] = float32(math.Copysign(0, float64(r.IntN(2)*2-1)))
				}
			}
			scale := float32(r.NormFloat64())
			check := func(name string, got, want []float32) {
				t.Helper()
				for i := range got {
					if !blocks.SameFloat(got[i], want[i]) || got[i] == 0 && math.Signbit(float64(got[i])) != math.Signbit(float64(want[i])) {
						t.Fatalf("%s m=%d rows=%d [%d]: %v, Go %v", name, m, rows, i, got[i], want[i])
					}
				}
			}
			s1, s2 := append([]float32(nil), s...), append([]float32(nil), s...)
			mx1, mx2 := append([]float32(nil), v...), append([]float32(nil), v...)
			ScaleMaxRows(s1, scale, mx1)
			scaleMaxRowsGo(s2, scale, mx2)
			check("ScaleMaxRows s", s1, s2)
			check("ScaleMaxRows mx", mx1, mx2)
			s1, s2 = append(s1[:0], s...), append(s2[:0], s...)
			SubRows(s1, v)
			subRowsGo(s2, v)
			check("SubRows", s1, s2)
			s1, s2 = append(s1[:0], s...), append(s2[:0], s...)
			MulRows(s1, v)
			mulRowsGo(s2, v)
			check("MulRows", s1, s2)
			sum1, sum2 := make([]float64, m), make([]float64, m)
			for i := range sum1 {
				sum1[i] = r.NormFloat64()
				sum2[i] = sum1[i]
			}
			SumRowsF64(sum1, s)
			sumRowsF64Go(sum2, s)
			for i := range sum1 {
				if math.Float64bits(sum1[i]) != math.Float64bits(sum2[i]) && !(sum1[i] != sum1[i] && sum2[i] != sum2[i]) {
					t.Fatalf("SumRowsF64 m=%d rows=%d [%d]: %v, Go %v", m, rows, i, sum1[i], sum2[i])
				}
			}
		}
	}
	// The Go forms themselves: one hand-checked case.
	s := []float32{1, -2, 3, 4}
	mx := []float32{float32(math.Inf(-1)), 0}
	ScaleMaxRows(s, 2, mx)
	if s[0] != 2 || s[3] != 8 || mx[0] != 6 || mx[1] != 8 {
		t.Errorf("ScaleMaxRows: s %v mx %v", s, mx)
	}
	for name, f := range map[string]func(){
		"ragged":  func() { SubRows(make([]float32, 5), make([]float32, 2)) },
		"empty v": func() { MulRows(make([]float32, 4), nil) },
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
	SubRows(nil, nil) // nothing to do
}
