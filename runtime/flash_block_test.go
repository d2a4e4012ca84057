package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFlashBlockTiles checks flashBlock against flashF16, bit for bit,
// where TestAttendBlockMatchesAttend does not reach: depths over several
// slot tiles, whole attnTokens blocks, GQA groups past the eight heads of
// one assembly call, head size 256, and masks whose rows are runs of
// allowed slots split by tile borders.
func TestFlashBlockTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct{ nh, nkv, d, past, t int }{
		{8, 2, 64, 150, 9}, {24, 2, 128, 90, 8}, {8, 2, 256, 40, 3}, {4, 1, 96, 70, 5}, {12, 1, 32, 300, 1},
	} {
		for _, masked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%+v/masked=%v", tc, masked), func(t *testing.T) {
				n := tc.past + tc.t
				kvDim, group := tc.nkv*tc.d, tc.nh/tc.nkv
				rnd := func(m int) []float32 {
					x := make([]float32, m)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					roundF16(x)
					return x
				}
				q, k, v := rnd(tc.t*tc.nh*tc.d), rnd(n*kvDim), rnd(n*kvDim)
				var mask []bool
				if masked {
					mask = make([]bool, tc.t*n)
					for i := range tc.t {
						on := true
						for j := range n {
							if rng.IntN(7) == 0 {
								on = !on
							}
							mask[i*n+j] = on
						}
						mask[i*n+rng.IntN(n)] = true
					}
				}
				scale := float32(1 / math.Sqrt(float64(tc.d)))
				want := make([]float32, len(q))
				for i := range tc.t {
					for h := range tc.nh {
						var row []bool
						last := tc.past + i
						if mask != nil {
							row, last = mask[i*n:(i+1)*n], n-1
						}
						p := i*tc.nh + h
						flashF16(q[p*tc.d:(p+1)*tc.d], k, v, kvDim, (h/group)*tc.d, row, last, scale, want[p*tc.d:(p+1)*tc.d])
					}
				}
				got := make([]float32, len(q))
				w := new(attnWork)
				for i0 := 0; i0 < tc.t; i0 += attnTokens {
					for g := range tc.nkv {
						flashBlock(w, q, kvHead(k, n, kvDim, tc.d, g), kvHead(v, n, kvDim, tc.d, g), got, i0, min(i0+attnTokens, tc.t), g, tc.nh, group, tc.d, tc.past, mask, scale)
					}
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("element %d = %v, want %v", i, got[i], want[i])
					}
				}
			})
		}
	}
}
