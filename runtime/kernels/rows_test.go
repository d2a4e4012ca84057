package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestRowsMatchSingle checks DotRows and AxpyRows against one Dot or Axpy
// per row, bit for bit, for lengths on and off the assembly's fast path.
func TestRowsMatchSingle(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 7, 8, 24, 32, 40, 64, 96, 128, 133} {
		for _, m := range []int{1, 2, 8, 13} {
			x, rows := randomF32(r, n, true), randomF32(r, m*n, true)
			out := make([]float32, m)
			DotRows(x, rows, out)
			for i := range out {
				if want := Dot(x, rows[i*n:(i+1)*n]); !sameFloat(out[i], want) {
					t.Fatalf("DotRows n=%d m=%d row %d = %v, want %v", n, m, i, out[i], want)
				}
			}
			a := randomF32(r, m, false)
			got, want := append([]float32(nil), rows...), append([]float32(nil), rows...)
			AxpyRows(a, x, got)
			for i := range a {
				Axpy(a[i], x, want[i*n:(i+1)*n])
			}
			for i := range got {
				if !sameFloat(got[i], want[i]) {
					t.Fatalf("AxpyRows n=%d m=%d element %d = %v, want %v", n, m, i, got[i], want[i])
				}
			}
		}
	}
}
