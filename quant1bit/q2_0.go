package quant1bit

import (
	"encoding/binary"
	"math"
	"math/bits"
	"sync"

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
	q := q2Pool.Get().(*q2Search) // reused: init and search overwrite what they read
	for b := 0; b*BlockQ2_0 < len(src); b++ {
		quantizeBlockQ2_0(q, src[b*BlockQ2_0:(b+1)*BlockQ2_0], dst[b*BlockBytesQ2_0:(b+1)*BlockBytesQ2_0])
	}
	q2Pool.Put(q)
}

// q2Pool keeps search states (9 KiB, on the heap since the kernels take
// pointers into them) from one row to the next.
var q2Pool = sync.Pool{New: func() any { return new(q2Search) }}

const f16Inf = 0x7c00 // first non-finite fp16 magnitude

func quantizeBlockQ2_0(q *q2Search, x []float32, y []byte) {
	if !q.init(x) { // NaN or ±Inf
		QuantizeRowQ2_0Ref(x, y)
		return
	}
	q.best.err = math.Inf(1)
	q.bound = math.Inf(1)
	q.consider(half.F32ToF16(q.amax), false) // the reference scale first, so it wins ties
	q.search()
	if q.best.err == math.Inf(1) { // amax overflows fp16 and no finite scale was found
		QuantizeRowQ2_0Ref(x, y)
		return
	}
	q2Encode(x, q.best, y)
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

func q2Encode(x []float32, c q2Candidate, y []byte) {
	h := c.h
	if c.neg && h != 0 {
		h |= 0x8000
	}
	binary.LittleEndian.PutUint16(y, h)
	// The codes are q2Code's, found by comparing with the midpoints as
	// q2Search.err does.
	sg, h1, h3, m1 := q2Midpoints(c.d())
	q2Codes((*[BlockQ2_0]float32)(x), sg, h1, h3, m1, (*[BlockQ2_0 / 4]byte)(y[2:]))
}

// q2Codes packs the codes of x for the thresholds (AVX2 on amd64, the
// same bytes): 0 up to m1, 1 below h1, 2 below h3, else 3, for y = sg·x.
var q2Codes = q2CodesGo

func q2CodesGo(x *[BlockQ2_0]float32, sg, h1, h3, m1 float64, y *[BlockQ2_0 / 4]byte) {
	for i := range BlockQ2_0 / 4 {
		var codes uint64
		for j := range 4 {
			yv := sg * float64(x[4*i+j])
			c := 2 - int64(math.Float64bits(yv-h1)>>63) - int64(math.Float64bits(yv-h3)>>63) + int64(math.Float64bits(m1-yv)>>63)
			codes |= uint64(c) << (2 * j)
		}
		y[i] = byte(codes)
	}
}

// q2Search holds one block, its magnitudes in increasing order, the
// sweep over the breakpoints and the best candidate so far.
//
// Write y = x for a positive d and y = −x for a negative one and let s =
// |d|. An element's best code is 2 while s < 2y/3, then 1 while s < 2y,
// then 0; for y < 0 it is −1 while s < 2|y|, then 0. So at s = 2|x| the
// element loses |x| from Σc·y and 1 from Σc² for both signs, and at
// s = 2|x|/3 the sign for which y > 0 loses |x| and 3. Between
// consecutive breakpoints the codes are fixed for each sign and the error
// is the parabola syy − 2s·Σc·y + s²·Σc².
type q2Search struct {
	x    [BlockQ2_0]float64 // the block
	syy  float64            // Σx² (the error of d = 0, summed as q2Error sums)
	amax float32
	n    int // nonzero elements
	mags q2Mags
	// The sweep: step k of 2n+1 covers [bp[k], bp[k+1]) (empty where
	// breakpoints tie), with running sums Σc·y in sx[p][k] and Σc² in
	// sc[p][k] for the positive (p = 0) and negative (p = 1) sign.
	bp [q2Steps + 1 + q2Pad]float64
	q2Sums
	best q2Candidate
	// bound is best.err widened by a relative 1e-9: the running sums and
	// the vertex bounds carry rounding error, so anything within the
	// slack is scored exactly before it is rejected.
	bound float64
	keys  [q2MagLen]uint32       // init's sort (and room for 4-wide loads)
	in    [2][q2MaskWords]uint64 // search's vertex masks
}

// q2Sort writes the sort keys of the 64 elements of x in increasing
// order: the bits of |x| shifted up one with the sign in the lowest bit
// (the float32 bits rotated left by one), so keys order as |x| does, a
// positive value before its negation, and the zeros (keys 0 and 1)
// first. amax is max|x|. A sorted list is unique, so every
// implementation gives the same keys (a rank sort in AVX2 on amd64).
var q2Sort = q2SortGo

func q2SortGo(x *[BlockQ2_0]float32, amax float32, keys *[BlockQ2_0]uint32) {
	// A bucket pass by |x|/amax leaves the keys nearly sorted and
	// insertion sort finishes them.
	var unsorted [BlockQ2_0]uint32
	var bucket [BlockQ2_0]uint8
	var start [BlockQ2_0 + 1]uint8
	scale := 0.0 // float64: 64/amax overflows float32 for tiny amax
	if amax > 0 {
		scale = float64(BlockQ2_0) / float64(amax)
	}
	for i, v := range x {
		k := bits.RotateLeft32(math.Float32bits(v), 1)
		b := min(int(float64(abs32(v))*scale), BlockQ2_0-1)
		unsorted[i], bucket[i] = k, uint8(b)
		start[b+1]++
	}
	var acc uint8 // prefix sums carried in a register, not through memory
	for b := 1; b <= BlockQ2_0; b++ {
		acc += start[b]
		start[b] = acc
	}
	for i, b := range bucket {
		keys[start[b]] = unsorted[i]
		start[b]++
	}
	for i := 1; i < BlockQ2_0; i++ {
		k := keys[i]
		j := i
		for j > 0 && keys[j-1] > k {
			keys[j] = keys[j-1]
			j--
		}
		keys[j] = k
	}
}

// init loads x and sorts its magnitudes; it reports false if x holds a
// NaN or ±Inf.
func (q *q2Search) init(x []float32) bool {
	// |x| bits order as the values do, and every NaN or ±Inf has |x| bits
	// ≥ those of +Inf, so one integer max finds amax and the bad blocks.
	// Σx² is summed as q2Error sums, in four scalars (an array indexed
	// by i%4 would keep the sums in memory).
	var abits uint32
	var e0, e1, e2, e3 float64
	xb := (*[BlockQ2_0]float32)(x)
	for i := 0; i < BlockQ2_0; i += 4 {
		v0, v1, v2, v3 := xb[i], xb[i+1], xb[i+2], xb[i+3]
		abits = max(abits, math.Float32bits(v0)&0x7fffffff, math.Float32bits(v1)&0x7fffffff,
			math.Float32bits(v2)&0x7fffffff, math.Float32bits(v3)&0x7fffffff)
		f0, f1, f2, f3 := float64(v0), float64(v1), float64(v2), float64(v3)
		q.x[i], q.x[i+1], q.x[i+2], q.x[i+3] = f0, f1, f2, f3
		e0 += float64(f0 * f0)
		e1 += float64(f1 * f1)
		e2 += float64(f2 * f2)
		e3 += float64(f3 * f3)
	}
	if abits >= 0x7f800000 {
		return false
	}
	amax := math.Float32frombits(abits)
	q.syy = float64(e0+e1) + float64(e2+e3)
	q.amax = amax
	keys := &q.keys
	q2Sort((*[BlockQ2_0]float32)(x), amax, (*[BlockQ2_0]uint32)(keys[:BlockQ2_0]))
	z := 0 // zeros (keys 0 and 1) come first and are dropped
	for z < BlockQ2_0 && keys[z] < 2 {
		z++
	}
	n := BlockQ2_0 - z
	q.n = n
	q2Fill(keys, z, n, &q.mags)
	return true
}

// sb is the sign bit of v as 0 or 1. For a difference of two floats it
// tells exactly whether the first is smaller: a rounded difference never
// changes sign, and equal values give +0.
func sb(v float64) float64 { return float64(int64(math.Float64bits(v) >> 63)) }

// err is q2Error(x, d): each element's code is found by comparing with
// the midpoints ±d/2 and 3d/2, which for float32 x and fp16 d decides
// exactly as rounding x/d does (x/d is never within a float64 rounding
// of a half-integer without being one).
func (q *q2Search) err(d float64) float64 {
	if d == 0 {
		return q.syy
	}
	sg, h1, h3, m1 := q2Midpoints(d)
	return q2Err(&q.x, d, sg, h1, h3, m1)
}

// q2Midpoints gives the sign of d and the midpoints the code comparisons
// use: sg·x ≥ h1 (d/2) and ≥ h3 (3d/2) add a code step, sg·x ≤ m1 (−d/2)
// removes one. For d = 0 they are infinite: every code is 1, value 0.
func q2Midpoints(d float64) (sg, h1, h3, m1 float64) {
	if d == 0 {
		return 1, math.Inf(1), math.Inf(1), math.Inf(-1)
	}
	a := math.Abs(d)
	sg = 1
	if d < 0 {
		sg = -1
	}
	return sg, 0.5 * a, 1.5 * a, -0.5 * a
}

// q2Err is the loop of q2Search.err (AVX2 on amd64, the same bits).
var q2Err = q2ErrGo

func q2ErrGo(x *[BlockQ2_0]float64, d, sg, h1, h3, m1 float64) float64 {
	var e [4]float64
	for i := 0; i < BlockQ2_0; i += 4 {
		for j := range 4 {
			v := x[i+j]
			y := sg * v
			// c is round(x/d) clamped (for d < 0, x/d = y/|d|): 1 for y ≥ d/2,
			// 1 more for y ≥ 3d/2, −1 for y ≤ −d/2. c·d is exact, and the
			// rounding of x − c·d is q2Error's.
			c := 1 - sb(y-h1) - sb(y-h3) + sb(m1-y)
			r := v - float64(c*d)
			e[j] += float64(r * r)
		}
	}
	return float64(e[0]+e[1]) + float64(e[2]+e[3])
}

// consider scores the stored scale (h, neg) exactly and keeps it if it is
// strictly better than the best so far.
func (q *q2Search) consider(h uint16, neg bool) {
	if h >= f16Inf || (h == q.best.h && neg == q.best.neg && q.best.err < math.Inf(1)) {
		return
	}
	c := q2Candidate{h: h, neg: neg}
	if e := q.err(c.d()); e < q.best.err {
		c.err = e
		q.best = c
		q.bound = e + e*1e-9
	}
}

// search finds the best stored scale in two passes over the intervals.
// The error as a function of s is continuous and each element's term is
// a minimum of parabolas, so its kinks point up and its minimum is the
// vertex of some interval's parabola that lies inside that interval.
// The sweep walks the breakpoints in increasing order (the 2|x|/3 and
// 2|x| lists, both sorted, merged without branches) and records every
// interval's running sums; the first pass finds the interval holding the
// minimum, and scoring the fp16 neighbours of its vertex gives a bound
// within an fp16 step of the optimum. The second pass then scores, in
// increasing s, the neighbours of the vertex (clamped to the interval) of
// every interval whose vertex value is below the bound: the best fp16
// value inside an interval is one of them.
func (q *q2Search) search() {
	n := q.n
	steps := 2*n + 1
	q.sweep()
	bestX, bestC, bestSign := 0.0, 0.0, -1
	in := &q.in
	q2Vertex(&q.bp, &q.sx[0], &q.sc[0], steps, &in[0])
	q2Vertex(&q.bp, &q.sx[1], &q.sc[1], steps, &in[1])
	for w := range q2MaskWords {
		for m := in[0][w] | in[1][w]; m != 0; m &= m - 1 {
			k := 64*w + bits.TrailingZeros64(m)
			for p := range 2 {
				x, c := q.sx[p][k], q.sc[p][k]
				if in[p][w]&(m&-m) != 0 && (bestSign < 0 || float64(x*x)*bestC > float64(bestX*bestX)*c) {
					bestX, bestC, bestSign = x, c, p
				}
			}
		}
	}
	if bestSign >= 0 {
		a, b := f16Bracket(bestX / bestC)
		q.consider(a, bestSign == 1)
		q.consider(b, bestSign == 1)
	}
	// Pass 2, in increasing s for each sign. (The bound only falls, so
	// an interval that passes here would also have passed against the
	// reference scale's bound.)
	for p := range 2 {
		for k := q2Below(&q.bp, &q.sx[p], &q.sc[p], 0, steps, q.syy-q.bound); k < steps; k = q2Below(&q.bp, &q.sx[p], &q.sc[p], k+1, steps, q.syy-q.bound) {
			q.interval(q.bp[k], q.bp[k+1], q.sx[p][k], q.sc[p][k], p == 1)
		}
	}
}

// q2Steps is the most sweep steps (2·64 + 1), q2Pad the room after them
// for 4-wide loads, and q2MaskWords the words of a step bit mask.
const (
	q2Steps     = 2*BlockQ2_0 + 1
	q2Pad       = 4
	q2MaskWords = (q2Steps + 63) / 64
)

// q2Vertex sets bit k of in for each of the first steps steps whose
// interval [bp[k], bp[k+1]) is not empty and holds the vertex sx[k]/sc[k]
// of its parabola (sc[k] > 0); AVX2 on amd64, the same bits. Entries
// from steps to steps+3 are read and must have sc = 0.
var q2Vertex = q2VertexGo

func q2VertexGo(bp *[q2Steps + 1 + q2Pad]float64, sx, sc *[q2Steps + q2Pad]float64, steps int, in *[q2MaskWords]uint64) {
	*in = [q2MaskWords]uint64{}
	for k := range steps {
		lo, hi, x, c := bp[k], bp[k+1], sx[k], sc[k]
		if hi > lo && c > 0 && x >= lo*c && x <= hi*c {
			in[k/64] |= 1 << (k % 64)
		}
	}
}

// q2Below returns the first step j in [k, steps) whose interval is not
// empty and whose parabola's vertex value is below the bound, that is
// sc[j] > 0 and K·sc[j] < sx[j]² for K = syy − bound, or steps if there
// is none; AVX2 on amd64, the same result. Entries from steps to steps+3
// are read and must have sc = 0.
var q2Below = q2BelowGo

func q2BelowGo(bp *[q2Steps + 1 + q2Pad]float64, sx, sc *[q2Steps + q2Pad]float64, k, steps int, K float64) int {
	for ; k < steps; k++ {
		if c := sc[k]; c > 0 && float64(K*c) < float64(sx[k]*sx[k]) && bp[k+1] > bp[k] {
			return k
		}
	}
	return steps
}

// q2MagLen is the length of the magnitude lists: 64 and a sentinel,
// rounded up for 4-wide stores.
const q2MagLen = BlockQ2_0 + 4

// q2Mags holds a block's nonzero magnitudes in increasing order, each
// list followed by a sentinel: the bits of the breakpoints 2|x|/3 (k3)
// and 2|x| (k2), +Inf after the last; |x| (0 after); and a mask of ones
// where x < 0 (0 after). Non-negative floats and +Inf order as their bits
// do.
type q2Mags struct {
	k3, k2 [q2MagLen]uint64
	ax     [q2MagLen]float64
	gm     [q2MagLen]uint64
}

// q2Fill fills m from the n sort keys from keys[z] (AVX2 on amd64, the
// same bits). It may write entries up to the next multiple of 4 after n.
var q2Fill = q2FillGo

func q2FillGo(keys *[q2MagLen]uint32, z, n int, m *q2Mags) {
	for i := range n {
		k := keys[z+i]
		a := float64(math.Float32frombits(k >> 1))
		m.ax[i], m.gm[i] = a, -uint64(k&1)
		m.k3[i], m.k2[i] = math.Float64bits(a*(2.0/3)), math.Float64bits(2*a)
	}
	const inf = 0x7ff0000000000000
	m.k3[n], m.k2[n], m.ax[n], m.gm[n] = inf, inf, 0, 0
}

// q2Sums holds the sweep's running sums: Σc·y in sx[p][k] and Σc² in
// sc[p][k] for the positive (p = 0) and negative (p = 1) sign.
type q2Sums struct {
	sx, sc [2][q2Steps + q2Pad]float64
}

// sweep fills bp, sx and sc, and zeroes the padding of sc.
func (q *q2Search) sweep() {
	steps := 2*q.n + 1
	q.bp[0] = 0
	q2Sweep(&q.mags, steps, &q.bp, &q.q2Sums)
	for k := steps; k < steps+q2Pad; k++ {
		q.sc[0][k], q.sc[1][k] = 0, 0
	}
}

// q2Sweep merges the two breakpoint lists (a 2|x|/3 one first only if
// strictly smaller) and records, for each of the steps steps, the
// breakpoint that ends it in bp[k+1] and the running sums before it in
// sx[p][k], sc[p][k]. The sums start just above s = 0, where y > 0 codes
// 2 and y < 0 codes −1, and each is a serial float64 sum in element and
// then merge order (AVX2 on amd64, the same bits). A 2|x|/3 breakpoint
// moves the sign with y > 0 by (|x|, 3); a 2|x| one moves both by
// (|x|, 1).
var q2Sweep = q2SweepGo

func q2SweepGo(m *q2Mags, steps int, bp *[q2Steps + 1 + q2Pad]float64, s *q2Sums) {
	sx, sc := &s.sx, &s.sc
	var x0, c0, x1, c1 float64
	for i := range steps / 2 {
		a, g := m.ax[i], float64(m.gm[i]&1)
		x0 += a + a*(1-g)
		c0 += 1 + 3*(1-g)
		x1 += a + a*g
		c1 += 1 + 3*g
	}
	ia, ib := 0, 0
	for k := range steps {
		b3, b2 := m.k3[ia], m.k2[ib]
		ti := (b3 - b2) >> 63 // 1: the next breakpoint is a 2|x|/3 one
		bp[k+1] = math.Float64frombits(b2 ^ (b2^b3)&-ti)
		sx[0][k], sc[0][k], sx[1][k], sc[1][k] = x0, c0, x1, c1
		// t and u are 0 and 1, so each delta is exact.
		a3, g := m.ax[ia], float64(m.gm[ia]&1)
		a2 := m.ax[ib]
		t := float64(int64(ti))
		u := 1 - t
		x0 -= t*(a3*(1-g)) + u*a2
		c0 -= t*(3*(1-g)) + u
		x1 -= t*(a3*g) + u*a2
		c1 -= t*(3*g) + u
		ia += int(ti)
		ib += 1 - int(ti)
	}
}

// interval scores the fp16 neighbours of the error parabola's vertex,
// clamped to [lo, hi]. The running-sum error of a neighbour outside the
// interval overestimates its true error, which is harmless: the best
// fp16 value inside each interval is one of the two neighbours, and the
// true optimum is scored by its own interval.
func (q *q2Search) interval(lo, hi, sxc, scc float64, neg bool) {
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

// try scores magnitude h exactly if the interval's running sums say it
// may beat the best so far.
func (q *q2Search) try(h uint16, neg bool, sxc, scc float64) {
	if h >= f16Inf {
		return
	}
	s := float64(half.F16ToF32(h))
	if e := q.syy - float64(2*s*sxc) + float64(float64(s*s)*scc); e < q.bound {
		q.consider(h, neg)
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
