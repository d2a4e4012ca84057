package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
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
				if want := Dot(x, rows[i*n:(i+1)*n]); !blocks.SameFloat(out[i], want) {
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
				if !blocks.SameFloat(got[i], want[i]) {
					t.Fatalf("AxpyRows n=%d m=%d element %d = %v, want %v", n, m, i, got[i], want[i])
				}
			}
		}
	}
}

// TestF16UpdatesMatchGo checks MadF16 and ScaleF16 (assembly where the CPU
// has it) against their Go definitions, bit for bit, on values spanning
// binary16's subnormals, normals and overflow.
func TestF16UpdatesMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	f16ish := func(n int) []float32 {
		x := randomF32(r, n, true)
		for i := range x {
			if i%3 == 0 {
				x[i] = f16(x[i] * float32(math.Ldexp(1, r.IntN(40)-26)))
			}
		}
		return x
	}
	for _, n := range []int{1, 3, 4, 8, 13, 64, 100} {
		for range 20 {
			x, y := f16ish(n), f16ish(n)
			a := float32(math.Ldexp(r.Float64(), r.IntN(20)-10))
			got, want := append([]float32(nil), y...), append([]float32(nil), y...)
			MadF16(a, x, got)
			madF16Go(a, x, want)
			for i := range got {
				if !blocks.SameFloat(got[i], want[i]) {
					t.Fatalf("MadF16(%v) n=%d [%d]: %v·%v+%v = %v, want %v", a, n, i, x[i], a, y[i], got[i], want[i])
				}
			}
			got, want = append([]float32(nil), y...), append([]float32(nil), y...)
			ScaleF16(a, got)
			scaleF16Go(a, want, want)
			for i := range got {
				if !blocks.SameFloat(got[i], want[i]) {
					t.Fatalf("ScaleF16(%v) n=%d [%d]: %v = %v, want %v", a, n, i, y[i], got[i], want[i])
				}
			}
		}
	}
}
