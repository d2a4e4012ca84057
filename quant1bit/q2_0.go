package quant1bit

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/qnnprep/qnnprep/internal/half"
)

// QuantizeRowQ2_0Ref encodes src as Q2_0 blocks into dst, byte for byte as
// ggml's quantize_row_q2_0_ref: d = max|x| in float32, stored as fp16;
// codes q = clamp(roundf(x·(1/d)) + 1, 0, 3) use the float32 d (not the
// fp16-rounded one), and an all-zero block gets d = 0 and code 1.
// Element j of a block is bits 2(j%4)..2(j%4)+1 of code byte j/4 and
// decodes to (q−1)·d. len(src) must be a multiple of 64 and dst must hold
// len(src)/64*18 bytes.
func QuantizeRowQ2_0Ref(src []float32, dst []byte) {
	rowBytes("QuantizeRowQ2_0Ref", len(src), BlockQ2_0, BlockBytesQ2_0, len(dst))
	for b := 0; b*BlockQ2_0 < len(src); b++ {
		x := src[b*BlockQ2_0 : (b+1)*BlockQ2_0]
		y := dst[b*BlockBytesQ2_0 : (b+1)*BlockBytesQ2_0]
		var amax float32
		for _, v := range x {
			if a := abs32(v); !(amax > a) {
				amax = a
			}
		}
		var id float32
		if amax != 0 {
			id = 1 / amax
		}
		binary.LittleEndian.PutUint16(y, half.F32ToF16(amax))
		for i := range BlockQ2_0 / 4 {
			var codes byte
			for j, v := range x[4*i : 4*i+4] {
				q := roundAway(v*id) + 1
				codes |= byte(min(max(q, 0), 3)) << (2 * j)
			}
			y[2+i] = codes
		}
	}
}

// QuantizeRowQ2_0 encodes src as Q2_0 blocks into dst, choosing for each
// block the scale that minimises the squared error of the decoded block.
//
// The search is over the scale actually stored: every finite fp16 value of
// either sign (a negative d turns the codes {−1,0,1,2}·d into
// {+|d|,0,−|d|,−2|d|}, which suits blocks whose extreme is negative), with
// each element given its best code for that d. For a fixed magnitude the
// best codes change only at the breakpoints |x|/0.5 and |x|/1.5; between
// breakpoints the error is a parabola in d, so the optimum over fp16
// values is one of the two fp16 neighbours of each interval's vertex. The
// sweep visits the intervals in increasing order and keeps the first
// strictly best candidate, so the result is deterministic. The reference
// scale max|x| is always a candidate, so no block is ever worse than
// QuantizeRowQ2_0Ref (up to float64 rounding in exact ties). Blocks with
// NaN or ±Inf are encoded by QuantizeRowQ2_0Ref.
// len(src) must be a multiple of 64 and dst must hold len(src)/64*18 bytes.
func QuantizeRowQ2_0(src []float32, dst []byte) {
	rowBytes("QuantizeRowQ2_0", len(src), BlockQ2_0, BlockBytesQ2_0, len(dst))
	for b := 0; b*BlockQ2_0 < len(src); b++ {
		quantizeBlockQ2_0(src[b*BlockQ2_0:(b+1)*BlockQ2_0], dst[b*BlockBytesQ2_0:(b+1)*BlockBytesQ2_0])
	}
}

const f16Inf = 0x7c00 // first non-finite fp16 magnitude

func quantizeBlockQ2_0(x []float32, y []byte) {
	var amax float32
	for _, v := range x {
		if v-v != 0 { // NaN or ±Inf
			QuantizeRowQ2_0Ref(x, y)
			return
		}
		amax = max(amax, abs32(v))
	}
	best := q2Candidate{h: half.F32ToF16(amax), err: math.Inf(1)}
	if best.h < f16Inf {
		best.err = q2Error(x, best.d())
	}
	var s q2Search
	s.best.err = math.Inf(1)
	s.init(x)
	s.sweep()
	// The sweep's errors come from running sums; confirm against the
	// reference scale with a direct computation.
	if s.best.err < math.Inf(1) {
		if e := q2Error(x, s.best.d()); e < best.err {
			best = s.best
			best.err = e
		}
	}
	if best.err == math.Inf(1) { // amax overflows fp16 and no finite scale was found
		QuantizeRowQ2_0Ref(x, y)
		return
	}
	q2Encode(x, best, y)
}

// q2Candidate is a stored scale: fp16 magnitude bits h and a sign.
type q2Candidate struct {
	h   uint16
	neg bool
	err float64
}

func (c q2Candidate) d() float64 {
	d := float64(half.F16ToF32(c.h))
	if c.neg {
		return -d
	}
	return d
}

// q2Code returns the code (q−1 ∈ {−1,0,1,2}) nearest to x/d.
func q2Code(x, d float64) int {
	if d == 0 {
		return 0
	}
	return min(max(int(math.Round(x/d)), -1), 2)
}

// q2Error is Σ (x − c·d)² with each c the best code for d.
func q2Error(x []float32, d float64) float64 {
	var e float64
	for _, v := range x {
		// Explicit conversions keep each product rounded on its own: Go may
		// otherwise fuse a*b+c, and the chosen scale must not depend on
		// the build.
		r := float64(v) - float64(float64(q2Code(float64(v), d))*d)
		e += float64(r * r)
	}
	return e
}

func q2Encode(x []float32, c q2Candidate, y []byte) {
	h := c.h
	if c.neg && h != 0 {
		h |= 0x8000
	}
	binary.LittleEndian.PutUint16(y, h)
	d := c.d()
	for i := range BlockQ2_0 / 4 {
		var codes byte
		for j, v := range x[4*i : 4*i+4] {
			codes |= byte(q2Code(float64(v), d)+1) << (2 * j)
		}
		y[2+i] = codes
	}
}

// q2Search holds one block's magnitudes sorted ascending, with signs, and
// the best candidate so far.
type q2Search struct {
	ax   [BlockQ2_0]float64 // |x| ascending, zeros dropped
	ax2  [BlockQ2_0]float64 // 2|x|: where code ±1 gives way to 0
	ax3  [BlockQ2_0]float64 // 2|x|/3: where code 2 gives way to 1
	neg  [BlockQ2_0]bool    // x < 0 for the same element
	n    int
	syy  float64 // Σx²
	best q2Candidate
}

func (q *q2Search) init(x []float32) {
	// Sort keys: the float64 bits of |x| (monotonic for non-negative
	// values) with the sign in the lowest bit, which a float32 widened to
	// float64 never uses. Ties in |x| put positive values first.
	var keys [BlockQ2_0]uint64
	q.n, q.syy = 0, 0
	for _, v := range x {
		q.syy += float64(float64(v) * float64(v))
		if v == 0 {
			continue
		}
		k := math.Float64bits(float64(abs32(v)))
		if v < 0 {
			k |= 1
		}
		keys[q.n] = k
		q.n++
	}
	slices.Sort(keys[:q.n])
	for i, k := range keys[:q.n] {
		a := math.Float64frombits(k &^ 1)
		q.ax[i], q.ax2[i], q.ax3[i], q.neg[i] = a, 2*a, 2*a/3, k&1 != 0
	}
}

// sweep raises the scale magnitude s from 0 for both signs of d at once.
// With y = x for a positive d and y = −x for a negative one, an element's
// best code is 2 while s < 2y/3, then 1 while s < 2y, then 0; for y < 0 it
// is −1 while s < 2|y|, then 0. So at s = 2|x| both signs lose |x| from
// Σc·y and 1 from Σc², and at s = 2|x|/3 the sign for which y > 0 loses
// |x| and 3. Both breakpoint lists follow the sorted |x|; they are merged,
// and all events at one breakpoint are applied together before the next
// interval, so the sums do not depend on how ties are ordered.
func (q *q2Search) sweep() {
	var sxc, scc [2]float64 // [positive d, negative d]
	for k := range q.n {
		p := b2i(q.neg[k]) // the sign for which y > 0
		sxc[p] += 2 * q.ax[k]
		scc[p] += 4
		sxc[1-p] += q.ax[k]
		scc[1-p]++
	}
	ia, ib := 0, 0
	lo := 0.0
	for {
		hi := math.Inf(1)
		if ia < q.n {
			hi = q.ax3[ia]
		}
		if ib < q.n && q.ax2[ib] < hi {
			hi = q.ax2[ib]
		}
		if hi > lo {
			q.interval(lo, hi, sxc[0], scc[0], false)
			q.interval(lo, hi, sxc[1], scc[1], true)
		}
		if hi > math.MaxFloat64 {
			return
		}
		for ib < q.n && q.ax2[ib] == hi {
			sxc[0] -= q.ax[ib]
			sxc[1] -= q.ax[ib]
			scc[0]--
			scc[1]--
			ib++
		}
		for ia < q.n && q.ax3[ia] == hi {
			p := b2i(q.neg[ia])
			sxc[p] -= q.ax[ia]
			scc[p] -= 3
			ia++
		}
		lo = hi
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// interval scores the fp16 neighbours of the error parabola's vertex,
// clamped to [lo, hi], for one sign of d. The vertex value
// syy − sxc²/scc bounds the interval's error from below, so most
// intervals are skipped without a division.
func (q *q2Search) interval(lo, hi, sxc, scc float64, neg bool) {
	if scc <= 0 || float64((q.syy-q.best.err)*scc) >= float64(sxc*sxc) {
		return
	}
	v := sxc / scc
	if v < lo {
		v = lo
	} else if v > hi {
		v = hi
	}
	a, b := f16Bracket(v)
	q.try(a, neg, sxc, scc)
	if b != a {
		q.try(b, neg, sxc, scc)
	}
}

// try scores magnitude h with the current interval's codes. Outside the
// interval this overestimates the true error, which is harmless: the true
// optimum is scored exactly by its own interval.
func (q *q2Search) try(h uint16, neg bool, sxc, scc float64) {
	if h >= f16Inf {
		return
	}
	s := float64(half.F16ToF32(h))
	if e := q.syy - float64(2*s*sxc) + float64(float64(s*s)*scc); e < q.best.err {
		q.best = q2Candidate{h: h, neg: neg, err: e}
	}
}

// f16Bracket returns the largest and smallest fp16 bit patterns whose
// values are ≤ v and ≥ v (v ≥ 0; above the fp16 range hi is Inf). The
// floor comes from truncating v's binary expansion to fp16 precision.
func f16Bracket(v float64) (lo, hi uint16) {
	var h uint16
	switch {
	case v >= 65504:
		return 0x7bff, f16Inf
	case v < 0x1p-14: // subnormal fp16 range: multiples of 2⁻²⁴
		h = uint16(v * 0x1p24)
	default:
		b := math.Float64bits(v)
		h = uint16(int(b>>52)-1023+15)<<10 | uint16(b>>42)&0x3ff
	}
	if float64(half.F16ToF32(h)) == v {
		return h, h
	}
	return h, h + 1
}
