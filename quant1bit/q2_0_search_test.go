package quant1bit

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/stretchr/testify/require"
)

// adversarialBlock draws a block from a mix of shapes that stress the
// Q2_0 search: rounded weights (BF16, fp16) with many equal magnitudes,
// exact ties between breakpoints (|x| and 3|x|), symmetric and one-sided
// blocks, zeros, fp16-subnormal and beyond-fp16 magnitudes, float32
// subnormals, single outliers, and now and then a NaN or ±Inf.
func adversarialBlock(r *rand.Rand) []float32 {
	x := make([]float32, BlockQ2_0)
	scale := math.Ldexp(1, r.IntN(60)-40)
	switch r.IntN(12) {
	case 0, 1: // BF16-rounded Gaussian, like a checkpoint
		for i := range x {
			x[i] = half.BF16ToF32(half.F32ToBF16(float32(r.NormFloat64() * 0.02)))
		}
	case 2: // fp16-rounded Gaussian at a random scale
		for i := range x {
			x[i] = half.F16ToF32(half.F32ToF16(float32(r.NormFloat64() * scale)))
		}
	case 3: // few small integers: many ties and exact errors
		k := 1 + r.IntN(6)
		for i := range x {
			x[i] = float32(r.IntN(2*k+1)-k) * float32(scale)
		}
	case 4: // values and their triples, so 2|x| meets 2|3x|/3
		v := make([]float32, 1+r.IntN(4))
		for i := range v {
			v[i] = float32(1+r.IntN(8)) * float32(scale)
		}
		for i := range x {
			a := v[r.IntN(len(v))]
			if r.IntN(2) == 0 {
				a *= 3
			}
			if r.IntN(2) == 0 {
				a = -a
			}
			x[i] = a
		}
	case 5: // symmetric: every value with its negation
		for i := 0; i < BlockQ2_0; i += 2 {
			v := float32(r.NormFloat64() * scale)
			if r.IntN(3) == 0 {
				v = float32(math.Round(r.NormFloat64()*4)) * float32(scale)
			}
			x[i], x[i+1] = v, -v
		}
	case 6: // mostly zeros
		for range 1 + r.IntN(5) {
			x[r.IntN(BlockQ2_0)] = float32(r.NormFloat64() * scale)
		}
	case 7: // one-sided, one sign
		sg := float32(1 - 2*r.IntN(2))
		for i := range x {
			x[i] = sg * float32(math.Abs(r.NormFloat64())*scale)
		}
	case 8: // huge: near and beyond the fp16 range
		s := math.Ldexp(1, 10+r.IntN(12))
		for i := range x {
			x[i] = float32(r.NormFloat64() * s)
		}
	case 9: // tiny: fp16 subnormals and float32 subnormals
		s := math.Ldexp(1, -r.IntN(130)-10)
		for i := range x {
			x[i] = float32(r.NormFloat64() * s)
		}
	case 10: // one outlier in noise
		for i := range x {
			x[i] = float32(r.NormFloat64() * scale)
		}
		x[r.IntN(BlockQ2_0)] = float32(r.NormFloat64() * scale * 100)
	default: // all equal magnitude, random signs
		v := float32(scale * float64(1+r.IntN(100)))
		for i := range x {
			x[i] = v * float32(1-2*r.IntN(2))
		}
	}
	if r.IntN(8) == 0 { // sprinkle zeros of both signs
		for range r.IntN(20) {
			x[r.IntN(BlockQ2_0)] = float32(math.Copysign(0, float64(1-2*r.IntN(2))))
		}
	}
	if r.IntN(64) == 0 { // the reference encoder's blocks
		x[r.IntN(BlockQ2_0)] = float32(math.NaN())
	}
	return x
}

// exhaustiveQ2 is the oracle of the Q2_0 search: the least q2Error over
// the finite fp16 scales of either sign, tried one by one. Two facts
// spare it most of the 63488: a magnitude above 2·max|x| gives every
// element code 0, as d = 0 does; and no code exceeds 2 in magnitude, so at
// magnitude s an element costs at least (|x|−2s)², a bound that only grows
// as s falls: the walk down from 2·max|x| stops once it passes the best.
// It is NaN for a block with NaN or ±Inf and +Inf when every error
// overflows.
func exhaustiveQ2(x []float32) float64 {
	var amax float64
	for _, v := range x {
		amax = max(amax, math.Abs(float64(v)))
	}
	best := q2Error(x, 0)
	top := min(uint16(f16Inf), half.F32ToF16(float32(2*amax))+1)
	for h := top - 1; h > 0; h-- {
		s := float64(half.F16ToF32(h))
		if h%32 == 0 {
			var bound float64
			for _, v := range x {
				if r := math.Abs(float64(v)) - 2*s; r > 0 {
					bound += r * r
				}
			}
			if bound > best {
				break
			}
		}
		best = min(best, q2Error(x, s), q2Error(x, -s))
	}
	return best
}

// checkQ2Optimal encodes one block and checks it against exhaustiveQ2: the
// stored scale has the least error (bit for bit), the reference scale
// max|x| wins a tie, every element has q2Code's code, and a block with
// NaN or ±Inf (or whose every error overflows) is encoded as
// QuantizeRowQ2_0Ref encodes it.
func checkQ2Optimal(t *testing.T, x []float32) {
	t.Helper()
	got, ref := make([]byte, BlockBytesQ2_0), make([]byte, BlockBytesQ2_0)
	QuantizeRowQ2_0(x, got)
	best := exhaustiveQ2(x)
	if math.IsNaN(best) || math.IsInf(best, 1) {
		QuantizeRowQ2_0Ref(x, ref)
		require.Equal(t, ref, got, "block %v: not the reference encoding", x)
		return
	}
	h := binary.LittleEndian.Uint16(got)
	c := q2Candidate{h: h &^ 0x8000, neg: h&0x8000 != 0}
	d := c.d()
	require.Equal(t, best, q2Error(x, d), "block %v: scale %v is not the best", x, d)
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	if ha := half.F32ToF16(amax); ha < f16Inf && q2Error(x, float64(half.F16ToF32(ha))) == best {
		require.Equal(t, ha, h, "block %v: the reference scale ties but is not chosen", x)
	}
	for j, v := range x {
		want := byte(q2Code(float64(v), d) + 1)
		require.Equal(t, want, got[2+j/4]>>(2*(j%4))&3, "block %v: element %d", x, j)
	}
}

// TestQ2_0IsOptimal checks the search against the exhaustive oracle on
// random and adversarial blocks.
func TestQ2_0IsOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	n := 1000
	if testing.Short() {
		n = 200
	}
	for i := range n {
		if i%4 == 0 {
			checkQ2Optimal(t, randomBlock(r, BlockQ2_0))
		} else {
			checkQ2Optimal(t, adversarialBlock(r))
		}
	}
}

// TestQ2KernelsMatchGo compares the chosen vertex and bound scans with
// the Go loops, on the sweeps of many blocks and on arbitrary arrays
// (ties, zeros, infinities, NaN).
func TestQ2KernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 13))
	var q q2Search
	pick := []float64{0, math.Copysign(0, -1), 1, 2, 3, 0.5, math.Inf(1), math.NaN(), 1e-310, 7}
	for it := range 20000 {
		steps := 2*r.IntN(BlockQ2_0+1) + 1
		if it%2 == 0 {
			x := adversarialBlock(r)
			if !q.init(x) {
				continue
			}
			q.sweep()
			steps = 2*q.n + 1
		} else {
			for k := range q.bp {
				q.bp[k] = pick[r.IntN(len(pick))] * float64(1+r.IntN(3))
			}
			for p := range 2 {
				for k := range q.sx[p] {
					q.sx[p][k] = pick[r.IntN(len(pick))] * float64(1+r.IntN(3))
					q.sc[p][k] = float64(r.IntN(4))
					if k >= steps {
						q.sc[p][k] = 0
					}
				}
			}
		}
		for p := range 2 {
			var got, want [q2MaskWords]uint64
			q2Vertex(&q.bp, &q.sx[p], &q.sc[p], steps, &got)
			q2VertexGo(&q.bp, &q.sx[p], &q.sc[p], steps, &want)
			if got != want {
				t.Fatalf("case %d sign %d: vertex mask %x, Go %x", it, p, got, want)
			}
			for range 4 {
				K := pick[r.IntN(len(pick))] * (r.Float64()*4 - 2)
				if it%2 == 0 {
					K = q.syy * (1 - r.Float64()*r.Float64())
				}
				k := r.IntN(steps + 1)
				if g, w := q2Below(&q.bp, &q.sx[p], &q.sc[p], k, steps, K), q2BelowGo(&q.bp, &q.sx[p], &q.sc[p], k, steps, K); g != w {
					t.Fatalf("case %d sign %d from %d K=%v: %d, Go %d", it, p, k, K, g, w)
				}
			}
		}
	}
}

// TestQ2SortMatchesGo compares the chosen sort with the Go one on
// adversarial blocks and on arbitrary finite bit patterns.
func TestQ2SortMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 15))
	for it := range 50000 {
		x := adversarialBlock(r)
		if it%3 == 0 {
			for i := range x {
				x[i] = math.Float32frombits(r.Uint32()%0x7f800000 | r.Uint32()&0x80000000)
				if r.IntN(4) == 0 {
					x[i] = x[r.IntN(i+1)]
				}
			}
		}
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		if amax-amax != 0 { // NaN or ±Inf: not sorted
			continue
		}
		var got, want [BlockQ2_0]uint32
		q2Sort((*[BlockQ2_0]float32)(x), amax, &got)
		q2SortGo((*[BlockQ2_0]float32)(x), amax, &want)
		if got != want {
			t.Fatalf("case %d %v:\n got %x\nwant %x", it, x, got, want)
		}
	}
}

// TestQ2SweepMatchesGo compares the chosen fill and sweep with the Go
// ones, bit for bit, on adversarial blocks.
func TestQ2SweepMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 17))
	var q q2Search
	for it := range 50000 {
		if !q.init(adversarialBlock(r)) {
			continue
		}
		var m q2Mags
		z := BlockQ2_0 - q.n
		q2FillGo(&q.keys, z, q.n, &m)
		for i := range q.n + 1 {
			if m.k3[i] != q.mags.k3[i] || m.k2[i] != q.mags.k2[i] || math.Float64bits(m.ax[i]) != math.Float64bits(q.mags.ax[i]) || m.gm[i] != q.mags.gm[i] {
				t.Fatalf("case %d element %d: fill %x %x %v %x, Go %x %x %v %x", it, i, q.mags.k3[i], q.mags.k2[i], q.mags.ax[i], q.mags.gm[i], m.k3[i], m.k2[i], m.ax[i], m.gm[i])
			}
		}
		steps := 2*q.n + 1
		var bp [2][q2Steps + 1 + q2Pad]float64
		var sums [2]q2Sums
		q2Sweep(&q.mags, steps, &bp[0], &sums[0])
		q2SweepGo(&q.mags, steps, &bp[1], &sums[1])
		for k := range steps {
			for p := range 2 {
				a, b := &sums[0], &sums[1]
				if math.Float64bits(a.sx[p][k]) != math.Float64bits(b.sx[p][k]) || math.Float64bits(a.sc[p][k]) != math.Float64bits(b.sc[p][k]) {
					t.Fatalf("case %d step %d sign %d: sums %v %v, Go %v %v", it, k, p, a.sx[p][k], a.sc[p][k], b.sx[p][k], b.sc[p][k])
				}
			}
			if math.Float64bits(bp[0][k+1]) != math.Float64bits(bp[1][k+1]) {
				t.Fatalf("case %d step %d: breakpoint %v, Go %v", it, k, bp[0][k+1], bp[1][k+1])
			}
		}
	}
}

// TestQ2CodesMatchGo compares the chosen code packer with the Go one for
// scales at and around the elements' thresholds, of both signs, and 0.
func TestQ2CodesMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 19))
	for it := range 20000 {
		x := adversarialBlock(r)
		bad := false
		for _, v := range x {
			bad = bad || v-v != 0
		}
		if bad {
			continue
		}
		v := math.Abs(float64(x[r.IntN(BlockQ2_0)]))
		h := half.F32ToF16(float32(v * []float64{0, 2, 2.0 / 3, 1, 0.7}[r.IntN(5)]))
		h += uint16(r.IntN(3)) - 1
		if h >= f16Inf {
			continue
		}
		c := q2Candidate{h: h, neg: r.IntN(2) == 0}
		d := c.d()
		sg, h1, h3, m1 := q2Midpoints(d)
		var got, want [BlockQ2_0 / 4]byte
		q2Codes((*[BlockQ2_0]float32)(x), sg, h1, h3, m1, &got)
		q2CodesGo((*[BlockQ2_0]float32)(x), sg, h1, h3, m1, &want)
		if got != want {
			t.Fatalf("case %d d=%v %v:\n got %x\nwant %x", it, d, x, got, want)
		}
	}
}

// FuzzQ2_0IsOptimal checks the search against the exhaustive oracle on
// arbitrary blocks (any bits, NaN and ±Inf included).
func FuzzQ2_0IsOptimal(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 64))
	f.Add(bytes.Repeat([]byte{0, 0, 0x40, 0xc0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x80}, 16))
	f.Fuzz(func(t *testing.T, data []byte) {
		if x := fuzzBlock(data); x != nil {
			checkQ2Optimal(t, x)
		}
	})
}

// scalesNear returns the finite fp16 scales |v|·f for the elements v of
// x and the factors fs, with their fp16 neighbours if around: the scales
// at which an element crosses a code boundary.
func scalesNear(x []float32, fs []float64, around bool) []uint16 {
	var hs []uint16
	for _, v := range x {
		for _, f := range fs {
			h := half.F32ToF16(float32(math.Abs(float64(v)) * f))
			near := []uint16{h}
			if around {
				near = []uint16{h - 1, h, h + 1}
			}
			for _, hh := range near {
				if hh < f16Inf {
					hs = append(hs, hh)
				}
			}
		}
	}
	return hs
}

// TestQ2ErrMatchesQ2Error checks the threshold-coded error against
// q2Error, bit for bit, at scales around every element's breakpoints.
func TestQ2ErrMatchesQ2Error(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for it := range 300 {
		x := randomBlock(r, BlockQ2_0)
		var q q2Search
		q.init(x)
		for _, h := range scalesNear(x[:8], []float64{2, 2.0 / 3, 1, 0.7, 1.3}, true) {
			for _, neg := range []bool{false, true} {
				d := q2Candidate{h: h, neg: neg}.d()
				if a, b := q.err(d), q2Error(x, d); math.Float64bits(a) != math.Float64bits(b) {
					t.Fatalf("block %d d=%v: err %v, q2Error %v", it, d, a, b)
				}
			}
		}
	}
}

// TestQ2EncodeMatchesQ2Code checks the threshold encoder against rounding
// x/d with q2Code, for scales around the elements' breakpoints.
func TestQ2EncodeMatchesQ2Code(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	got := make([]byte, BlockBytesQ2_0)
	for it := range 300 {
		x := randomBlock(r, BlockQ2_0)
		for _, h := range scalesNear(x[:8], []float64{0, 2, 2.0 / 3, 1, 0.7}, true) {
			for _, neg := range []bool{false, true} {
				c := q2Candidate{h: h, neg: neg}
				q2Encode(x, c, got)
				d := c.d()
				for j, v := range x {
					want := byte(q2Code(float64(v), d) + 1)
					if g := got[2+j/4] >> (2 * (j % 4)) & 3; g != want {
						t.Fatalf("block %d d=%v element %d (%v): code %d, q2Code gives %d", it, d, j, v, g, want)
					}
				}
			}
		}
	}
}

// TestQ2ErrAsmMatchesGo compares the chosen error kernel with the Go loop
// bit for bit.
func TestQ2ErrAsmMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	for it := range 2000 {
		x := randomBlock(r, BlockQ2_0)
		var q q2Search
		q.init(x)
		for _, h := range scalesNear(x[:4], []float64{2, 2.0 / 3, 1, 0.4}, false) {
			if h == 0 {
				continue
			}
			for _, neg := range []bool{false, true} {
				d := q2Candidate{h: h, neg: neg}.d()
				a := math.Abs(d)
				sg := 1.0
				if neg {
					sg = -1
				}
				got := q2Err(&q.x, d, sg, 0.5*a, 1.5*a, -0.5*a)
				want := q2ErrGo(&q.x, d, sg, 0.5*a, 1.5*a, -0.5*a)
				if math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("block %d d=%v: %v, Go loop %v", it, d, got, want)
				}
			}
		}
	}
}

// q2Code returns the code (q−1 ∈ {−1,0,1,2}) nearest to x/d.
func q2Code(x, d float64) int {
	if d == 0 {
		return 0
	}
	return min(max(int(math.Round(x/d)), -1), 2)
}

// q2Error is Σ (x − c·d)² with each c the best code for d, summed in
// four interleaved partial sums (element i into sum i%4) that are then
// added as (e0+e1)+(e2+e3); len(x) must be a multiple of 4.
func q2Error(x []float32, d float64) float64 {
	var e [4]float64
	for i, v := range x {
		// Explicit conversions keep each product rounded on its own: Go may
		// otherwise fuse a*b+c, and the chosen scale must not depend on
		// the build.
		r := float64(v) - float64(float64(q2Code(float64(v), d))*d)
		e[i%4] += float64(r * r)
	}
	return float64(e[0]+e[1]) + float64(e[2]+e[3])
}
