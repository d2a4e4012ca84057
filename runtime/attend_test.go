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
	for _, tc := range []attnShape{
		{4, 4, 8, 0, 1}, {8, 2, 16, 5, 3}, {8, 1, 64, 37, 9}, {6, 3, 40, 0, 6}, {32, 4, 64, 70, 1},
		{16, 2, 128, 20, 7}, {8, 1, 32, 3, 5}, // GQA groups of kernels.HeadGroup: DotHeads (assembly for 64 and 128)
	} {
		for _, masked := range []bool{false, true} {
			c := newAttnCase(rng, tc, false)
			n := c.n()
			if masked {
				c.mask = make([]bool, tc.t*n)
				for i := range tc.t {
					for j := range n {
						c.mask[i*n+j] = rng.IntN(3) > 0
					}
					c.mask[i*n+rng.IntN(n)] = true
				}
			}
			scores := make([]float32, n)
			want := c.reference(func(q []float32, kvOff int, row []bool, last int, o []float32) {
				attend(q, c.k, c.v, c.kvDim(), kvOff, row, last, c.scale, scores, o)
			})
			got := c.blocked(2, func(w *attnWork, k, v, o []float32, i0, i1, g int) {
				attendBlock(w, c.q, k, v, o, i0, i1, g, tc.nh, c.group(), tc.d, tc.past, c.mask, c.scale)
			})
			if err := sameBits(got, want); err != nil {
				t.Fatalf("attendBlock %+v masked=%v: %v", tc, masked, err)
			}

			// KVF16: the cache and q hold binary16 values.
			roundF16(c.q)
			roundF16(c.k)
			roundF16(c.v)
			if err := sameBits(c.blocked(2, c.flashBlock), c.flashReference()); err != nil {
				t.Fatalf("flashBlock %+v masked=%v: %v", tc, masked, err)
			}
		}
	}
}

// attnShape is the geometry of an attention test: nh query heads and nkv
// KV heads of d, past cached slots before t tokens.
type attnShape struct{ nh, nkv, d, past, t int }

// attnCase is one attention problem for the block tests: q [t][nh][d], a
// slot-major cache k and v [past+t][nkv·d], an optional mask [t][past+t].
type attnCase struct {
	attnShape
	q, k, v []float32
	mask    []bool
	scale   float32
}

// newAttnCase fills q, k and v with normal values, rounded to binary16
// when f16.
func newAttnCase(rng *rand.Rand, s attnShape, f16 bool) *attnCase {
	rnd := func(m int) []float32 {
		x := make([]float32, m)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		if f16 {
			roundF16(x)
		}
		return x
	}
	n := s.past + s.t
	return &attnCase{attnShape: s, q: rnd(s.t * s.nh * s.d), k: rnd(n * s.nkv * s.d), v: rnd(n * s.nkv * s.d),
		scale: float32(1 / math.Sqrt(float64(s.d)))}
}

func (c *attnCase) n() int     { return c.past + c.t }
func (c *attnCase) kvDim() int { return c.nkv * c.d }
func (c *attnCase) group() int { return c.nh / c.nkv }

// reference runs head (one query row against the slot-major cache) for
// every token and head and returns the outputs.
func (c *attnCase) reference(head func(q []float32, kvOff int, row []bool, last int, o []float32)) []float32 {
	out := make([]float32, len(c.q))
	n := c.n()
	for i := range c.t {
		for h := range c.nh {
			var row []bool
			last := c.past + i
			if c.mask != nil {
				row, last = c.mask[i*n:(i+1)*n], n-1
			}
			p := i*c.nh + h
			head(c.q[p*c.d:(p+1)*c.d], (h/c.group())*c.d, row, last, out[p*c.d:(p+1)*c.d])
		}
	}
	return out
}

// blocked runs block over blocks of step tokens and every KV head, with
// that head's rows in the head-major form, and returns the outputs.
func (c *attnCase) blocked(step int, block func(w *attnWork, k, v, o []float32, i0, i1, g int)) []float32 {
	out := make([]float32, len(c.q))
	w := new(attnWork)
	n := c.n()
	for i0 := 0; i0 < c.t; i0 += step {
		for g := range c.nkv {
			block(w, kvHead(c.k, n, c.kvDim(), c.d, g), kvHead(c.v, n, c.kvDim(), c.d, g), out, i0, min(i0+step, c.t), g)
		}
	}
	return out
}

// flashReference is reference with flashF16, flashBlock the block walk
// it defines.
func (c *attnCase) flashReference() []float32 {
	return c.reference(func(q []float32, kvOff int, row []bool, last int, o []float32) {
		flashF16(q, c.k, c.v, c.kvDim(), kvOff, row, last, c.scale, o)
	})
}

func (c *attnCase) flashBlock(w *attnWork, k, v, o []float32, i0, i1, g int) {
	flashBlock(w, c.q, k, v, o, i0, i1, g, c.nh, c.group(), c.d, c.past, c.mask, c.scale)
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
