package runtime

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/runtime/kernels"
)

// attend is the plain form of attendBlock: one (token, head) of float32 attention over the slots
// j ≤ last allowed by row (nil: all): scores q·k_j·scale, an exact
// softmax (max, exp, float64 sum), and o = Σ p_j v_j in slot order.
// k and v are [slot][stride] with this head's vectors at offset off.
func attend(q, k, v []float32, stride, off int, row []bool, last int, scale float32, scores, o []float32) {
	d := len(o)
	mx := float32(math.Inf(-1))
	for j := 0; j <= last; j++ {
		if row != nil && !row[j] {
			continue
		}
		sv := kernels.Dot(q, k[j*stride+off:j*stride+off+d]) * scale
		scores[j] = sv
		if sv > mx {
			mx = sv
		}
	}
	var sum float64
	for j := 0; j <= last; j++ {
		if row != nil && !row[j] {
			continue
		}
		p := expf(scores[j] - mx)
		scores[j] = p
		sum += float64(p)
	}
	inv := float32(1 / sum)
	for j := 0; j <= last; j++ {
		if row != nil && !row[j] {
			continue
		}
		kernels.Axpy(scores[j]*inv, v[j*stride+off:j*stride+off+d], o)
	}
}

// TestAttendBlockMatchesAttend checks that the grouped, token-blocked walk
// over the cache gives every (token, head) pair exactly the bits of the
// one-pair-at-a-time form, with and without a mask.
func TestAttendBlockMatchesAttend(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct{ nh, nkv, d, past, t int }{
		{4, 4, 8, 0, 1}, {8, 2, 16, 5, 3}, {8, 1, 64, 37, 9}, {6, 3, 40, 0, 6}, {32, 4, 64, 70, 1},
	} {
		for _, masked := range []bool{false, true} {
			n := tc.past + tc.t
			kvDim, group := tc.nkv*tc.d, tc.nh/tc.nkv
			rnd := func(m int) []float32 {
				x := make([]float32, m)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				return x
			}
			q, k, v := rnd(tc.t*tc.nh*tc.d), rnd(n*kvDim), rnd(n*kvDim)
			var mask []bool
			if masked {
				mask = make([]bool, tc.t*n)
				for i := range tc.t {
					for j := range n {
						mask[i*n+j] = rng.IntN(3) > 0
					}
					mask[i*n+rng.IntN(n)] = true
				}
			}
			scale := float32(1 / math.Sqrt(float64(tc.d)))
			want := make([]float32, len(q))
			scores := make([]float32, n)
			for i := range tc.t {
				for h := range tc.nh {
					var row []bool
					last := tc.past + i
					if mask != nil {
						row, last = mask[i*n:(i+1)*n], n-1
					}
					p := i*tc.nh + h
					attend(q[p*tc.d:(p+1)*tc.d], k, v, kvDim, (h/group)*tc.d, row, last, scale, scores, want[p*tc.d:(p+1)*tc.d])
				}
			}
			got := make([]float32, len(q))
			w := new(attnWork)
			for i0 := 0; i0 < tc.t; i0 += 2 {
				for g := range tc.nkv {
					attendBlock(w, q, k, v, got, i0, min(i0+2, tc.t), g, tc.nh, group, tc.d, kvDim, tc.past, mask, scale)
				}
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%+v masked=%v: element %d = %v, want %v", tc, masked, i, got[i], want[i])
				}
			}
		}
	}
}
