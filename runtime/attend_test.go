package runtime

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/internal/half"
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

// flashF16 is the plain form of flashBlock: one (token, head) of attention the way llama.cpp's CPU flash
// attention computes it over an F16 KV cache: one pass over the slots with
// an online softmax, the running output held in binary16 (each update
// y = f16(y·ms) or f16(y + v·vs) with a fused multiply-add), the running sum
// in float32, and a final division. k and v hold f16-rounded values; q is
// f16-rounded too.
func flashF16(q, k, v []float32, stride, off int, row []bool, last int, scale float32, o []float32) {
	d := len(o)
	m := float32(math.Inf(-1))
	var sum float32
	clear(o)
	for j := 0; j <= last; j++ {
		if row != nil && !row[j] {
			continue
		}
		s := kernels.Dot(q, k[j*stride+off:j*stride+off+d]) * scale
		ms, vs := float32(1), float32(1)
		if s > m {
			ms = expf(m - s)
			m = s
			for x := range o {
				o[x] = f16round(o[x] * ms)
			}
		} else {
			vs = expf(s - m)
		}
		vj := v[j*stride+off : j*stride+off+d]
		for x := range o {
			o[x] = f16round(float32(math.FMA(float64(vj[x]), float64(vs), float64(o[x]))))
		}
		sum = sum*ms + vs
	}
	inv := 1 / sum
	for x := range o {
		o[x] *= inv
	}
}

func f16round(x float32) float32 { return half.F16ToF32(half.F32ToF16(x)) }

// TestAttendBlockMatchesAttend checks that the grouped, token-blocked walks
// over the cache (float32 and KVF16) give every (token, head) pair exactly
// the bits of the one-pair-at-a-time forms, with and without a mask.
func TestAttendBlockMatchesAttend(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct{ nh, nkv, d, past, t int }{
		{4, 4, 8, 0, 1}, {8, 2, 16, 5, 3}, {8, 1, 64, 37, 9}, {6, 3, 40, 0, 6}, {32, 4, 64, 70, 1},
		{16, 2, 128, 20, 7}, {8, 1, 32, 3, 5}, // GQA groups of kernels.HeadGroup: DotHeads (assembly for 64 and 128)
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
			// reference runs head (one query row against the cache) for
			// every token and head into want.
			reference := func(head func(q []float32, kvOff int, row []bool, last int, o []float32)) {
				for i := range tc.t {
					for h := range tc.nh {
						var row []bool
						last := tc.past + i
						if mask != nil {
							row, last = mask[i*n:(i+1)*n], n-1
						}
						p := i*tc.nh + h
						head(q[p*tc.d:(p+1)*tc.d], (h/group)*tc.d, row, last, want[p*tc.d:(p+1)*tc.d])
					}
				}
			}
			scores := make([]float32, n)
			reference(func(q []float32, kvOff int, row []bool, last int, o []float32) {
				attend(q, k, v, kvDim, kvOff, row, last, scale, scores, o)
			})
			check := func(name string, block func(w *attnWork, q, k, v, o []float32, i0, i1, g int)) {
				t.Helper()
				got := make([]float32, len(q))
				w := new(attnWork)
				for i0 := 0; i0 < tc.t; i0 += 2 {
					for g := range tc.nkv {
						block(w, q, kvHead(k, n, kvDim, tc.d, g), kvHead(v, n, kvDim, tc.d, g), got, i0, min(i0+2, tc.t), g)
					}
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s %+v masked=%v: element %d = %v, want %v", name, tc, masked, i, got[i], want[i])
					}
				}
			}
			check("attendBlock", func(w *attnWork, q, k, v, o []float32, i0, i1, g int) {
				attendBlock(w, q, k, v, o, i0, i1, g, tc.nh, group, tc.d, tc.past, mask, scale)
			})

			// KVF16: the cache and q hold binary16 values.
			roundF16(q)
			roundF16(k)
			roundF16(v)
			clear(want)
			reference(func(q []float32, kvOff int, row []bool, last int, o []float32) {
				flashF16(q, k, v, kvDim, kvOff, row, last, scale, o)
			})
			check("flashBlock", func(w *attnWork, q, k, v, o []float32, i0, i1, g int) {
				flashBlock(w, q, k, v, o, i0, i1, g, tc.nh, group, tc.d, tc.past, mask, scale)
			})
		}
	}
}

// kvHead copies KV head g's rows out of a slot-major cache of n slots,
// [slot][kvDim], into the head-major form attendBlock and flashBlock
// read, [slot][d].
func kvHead(x []float32, n, kvDim, d, g int) []float32 {
	h := make([]float32, n*d)
	for j := range n {
		copy(h[j*d:(j+1)*d], x[j*kvDim+g*d:])
	}
	return h
}
