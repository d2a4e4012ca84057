package quant1bit

// The Q2_0 search as it was before the sweep was split into merge, sums
// and filters (commit 381e3fd), kept verbatim as the oracle: the new
// search must give these bytes for every block. The two helpers the new
// search still has unchanged (q2ErrGo, f16Bracket) are called, not copied.

import (
	"testing"

	"encoding/binary"
	"math"

	"github.com/qnnprep/qnnprep/internal/half"
)

func prevQuantizeRowQ2_0(src []float32, dst []byte) {
	rowBytes("prevQuantizeRowQ2_0", len(src), BlockQ2_0, BlockBytesQ2_0, len(dst))
	var q prevQ2Search // reused: init and search overwrite what they read
	for b := 0; b*BlockQ2_0 < len(src); b++ {
		prevQuantizeBlockQ2_0(&q, src[b*BlockQ2_0:(b+1)*BlockQ2_0], dst[b*BlockBytesQ2_0:(b+1)*BlockBytesQ2_0])
	}
}

func prevQuantizeBlockQ2_0(q *prevQ2Search, x []float32, y []byte) {
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
	prevQ2Encode(x, q.best, y)
}

func prevQ2Encode(x []float32, c q2Candidate, y []byte) {
	h := c.h
	if c.neg && h != 0 {
		h |= 0x8000
	}
	binary.LittleEndian.PutUint16(y, h)
	// The codes are q2Code's, found by comparing with the midpoints as
	// prevQ2Search.err does.
	d := c.d()
	a := math.Abs(d)
	sg := 1.0
	if d < 0 {
		sg = -1
	}
	h1, h3, m1 := 0.5*a, 1.5*a, -0.5*a
	if d == 0 {
		h1, h3, m1 = math.Inf(1), math.Inf(1), math.Inf(-1)
	}
	for i := range BlockQ2_0 / 4 {
		var codes uint64
		for j := range 4 {
			yv := sg * float64(x[4*i+j])
			c := 2 - int64(math.Float64bits(yv-h1)>>63) - int64(math.Float64bits(yv-h3)>>63) + int64(math.Float64bits(m1-yv)>>63)
			codes |= uint64(c) << (2 * j)
		}
		y[2+i] = byte(codes)
	}
}

// prevQ2Search holds one block, its magnitudes in increasing order, and the
// best candidate so far.
//
// Write y = x for a positive d and y = −x for a negative one and let s =
// |d|. An element's best code is 2 while s < 2y/3, then 1 while s < 2y,
// then 0; for y < 0 it is −1 while s < 2|y|, then 0. So at s = 2|x| the
// element loses |x| from Σc·y and 1 from Σc² for both signs, and at
// s = 2|x|/3 the sign for which y > 0 loses |x| and 3. Between
// consecutive breakpoints the codes are fixed for each sign and the error
// is the parabola syy − 2s·Σc·y + s²·Σc².
type prevQ2Search struct {
	x    [BlockQ2_0]float64 // the block
	syy  float64            // Σx² (the error of d = 0, summed as q2Error sums)
	amax float32
	n    int                    // nonzero elements
	ax   [BlockQ2_0 + 1]float64 // |x| ascending, then a 0 pad
	a2   [BlockQ2_0 + 1]float64 // 2|x|, then +Inf
	a3   [BlockQ2_0 + 1]float64 // 2|x|/3, then +Inf
	ng   [BlockQ2_0 + 1]float64 // 1 where x < 0, else 0
	best q2Candidate
	// bound is best.err widened by a relative 1e-9: the running sums and
	// the vertex bounds carry rounding error, so anything within the
	// slack is scored exactly before it is rejected.
	bound float64
	// The intervals of the sweep that can beat the reference scale, per
	// sign: bounds and sums, for the second pass.
	iv [2][2*BlockQ2_0 + 1]prevQ2Interval
	// init's scratch.
	keys, sorted [BlockQ2_0]uint64
	bucket       [BlockQ2_0]uint8
}

type prevQ2Interval struct{ lo, hi, sxc, scc float64 }

// init loads x and sorts its magnitudes; it reports false if x holds a
// NaN or ±Inf.
func (q *prevQ2Search) init(x []float32) bool {
	// |x| bits order as the values do, and every NaN or ±Inf has |x| bits
	// ≥ those of +Inf, so one integer max finds amax and the bad blocks.
	var abits uint32
	var e [4]float64 // Σx² summed as q2Error sums
	for i := range x {
		v := x[i]
		abits = max(abits, math.Float32bits(v)&0x7fffffff)
		f := float64(v)
		q.x[i] = f
		e[i%4] += float64(f * f)
	}
	if abits >= 0x7f800000 {
		return false
	}
	amax := math.Float32frombits(abits)
	q.syy = float64(e[0]+e[1]) + float64(e[2]+e[3])
	q.amax = amax
	// Sort keys: the float64 bits of |x| (monotonic for non-negative
	// values) with the sign in the lowest bit, which a float32 widened to
	// float64 never uses. A bucket pass by |x|/amax leaves the keys
	// nearly sorted and insertion sort finishes them.
	keys, sorted, bucket := &q.keys, &q.sorted, &q.bucket // written before read
	var start [BlockQ2_0 + 1]uint8
	n := 0
	if amax > 0 {
		scale := float64(BlockQ2_0) / float64(amax)
		for i := range q.x {
			f := q.x[i]
			if f == 0 {
				continue
			}
			b := math.Float64bits(f)
			k := b&^(1<<63) | b>>63
			bk := min(int(math.Abs(f)*scale), BlockQ2_0-1)
			keys[n], bucket[n] = k, uint8(bk)
			start[bk+1]++
			n++
		}
	}
	var acc uint8 // prefix sums carried in a register, not through memory
	for b := 1; b <= BlockQ2_0; b++ {
		acc += start[b]
		start[b] = acc
	}
	for i := range n {
		b := bucket[i]
		sorted[start[b]] = keys[i]
		start[b]++
	}
	for i := 1; i < n; i++ {
		k := sorted[i]
		j := i
		for j > 0 && sorted[j-1] > k {
			sorted[j] = sorted[j-1]
			j--
		}
		sorted[j] = k
	}
	q.n = n
	for i := range n {
		k := sorted[i]
		a := math.Float64frombits(k &^ 1)
		q.ax[i], q.a2[i], q.a3[i], q.ng[i] = a, 2*a, a*(2.0/3), float64(k&1)
	}
	q.ax[n], q.a2[n], q.a3[n], q.ng[n] = 0, math.Inf(1), math.Inf(1), 0
	return true
}

// err is q2Error(x, d): each element's code is found by comparing with
// the midpoints ±d/2 and 3d/2, which for float32 x and fp16 d decides
// exactly as rounding x/d does (x/d is never within a float64 rounding
// of a half-integer without being one).
func (q *prevQ2Search) err(d float64) float64 {
	if d == 0 {
		return q.syy
	}
	a := math.Abs(d)
	sg := 1.0
	if d < 0 {
		sg = -1
	}
	return q2ErrGo(&q.x, d, sg, 0.5*a, 1.5*a, -0.5*a)
}

// consider scores the stored scale (h, neg) exactly and keeps it if it is
// strictly better than the best so far.
func (q *prevQ2Search) consider(h uint16, neg bool) {
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
// The first pass walks the breakpoints in increasing order (the 2|x|/3
// and 2|x| lists, both sorted, merged without branches) and finds that
// interval; scoring the fp16 neighbours of its vertex gives a bound
// within an fp16 step of the optimum. The second pass then scores, in
// increasing s, the neighbours of the vertex (clamped to the interval) of
// every interval whose vertex value is below the bound: the best fp16
// value inside an interval is one of them.
func (q *prevQ2Search) search() {
	var x0, c0, x1, c1 float64 // sums just above s = 0: y > 0 codes 2, y < 0 codes −1
	for i := range q.n {
		a, g := q.ax[i], q.ng[i]
		x0 += a + a*(1-g)
		c0 += 1 + 3*(1-g)
		x1 += a + a*g
		c1 += 1 + 3*g
	}
	bestX, bestC, bestSign := 0.0, 0.0, -1
	ia, ib := 0, 0
	lo := 0.0
	// Only intervals whose vertex value is below the bound so far (the
	// reference scale's error, widened) can matter in the second pass:
	// they are appended without a branch, the count advancing by the
	// sign bit of (syy − bound)·Σc² − (Σc·y)².
	k := q.syy - q.bound
	m0, m1 := 0, 0
	for range 2*q.n + 1 {
		// Non-negative floats (and +Inf) order as their bits do.
		b3, b2 := math.Float64bits(q.a3[ia]), math.Float64bits(q.a2[ib])
		ti := (b3 - b2) >> 63 // 1: the next breakpoint is a 2|x|/3 one
		hi := math.Float64frombits(b2 ^ (b2^b3)&-ti)
		t := float64(int64(ti))
		if hi > lo {
			q.iv[0][m0] = prevQ2Interval{lo, hi, x0, c0}
			q.iv[1][m1] = prevQ2Interval{lo, hi, x1, c1}
			m0 += int(math.Float64bits(float64(k*c0)-float64(x0*x0)) >> 63)
			m1 += int(math.Float64bits(float64(k*c1)-float64(x1*x1)) >> 63)
			if c0 > 0 && x0 >= lo*c0 && x0 <= hi*c0 && (bestSign < 0 || float64(x0*x0)*bestC > float64(bestX*bestX)*c0) {
				bestX, bestC, bestSign = x0, c0, 0
			}
			if c1 > 0 && x1 >= lo*c1 && x1 <= hi*c1 && (bestSign < 0 || float64(x1*x1)*bestC > float64(bestX*bestX)*c1) {
				bestX, bestC, bestSign = x1, c1, 1
			}
		}
		// A 2|x|/3 breakpoint moves the sign with y > 0 by (|x|, 3); a
		// 2|x| one moves both by (|x|, 1).
		a3, g := q.ax[ia], q.ng[ia]
		a2 := q.ax[ib]
		u := 1 - t
		x0 -= t*(a3*(1-g)) + u*a2
		c0 -= t*(3*(1-g)) + u
		x1 -= t*(a3*g) + u*a2
		c1 -= t*(3*g) + u
		ia += int(ti)
		ib += 1 - int(ti)
		lo = hi
	}
	if bestSign >= 0 {
		a, b := f16Bracket(bestX / bestC)
		q.consider(a, bestSign == 1)
		q.consider(b, bestSign == 1)
	}
	// Pass 2, in increasing s for each sign.
	for p, m := range [2]int{m0, m1} {
		for _, iv := range q.iv[p][:m] {
			if iv.scc > 0 && float64((q.syy-q.bound)*iv.scc) < float64(iv.sxc*iv.sxc) {
				q.interval(iv.lo, iv.hi, iv.sxc, iv.scc, p == 1)
			}
		}
	}
}

// interval scores the fp16 neighbours of the error parabola's vertex,
// clamped to [lo, hi]. The running-sum error of a neighbour outside the
// interval overestimates its true error, which is harmless: the best
// fp16 value inside each interval is one of the two neighbours, and the
// true optimum is scored by its own interval.
func (q *prevQ2Search) interval(lo, hi, sxc, scc float64, neg bool) {
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
func (q *prevQ2Search) try(h uint16, neg bool, sxc, scc float64) {
	if h >= f16Inf {
		return
	}
	s := float64(half.F16ToF32(h))
	if e := q.syy - float64(2*s*sxc) + float64(float64(s*s)*scc); e < q.bound {
		q.consider(h, neg)
	}
}

func BenchmarkQuantizeRowQ2_0Prev(b *testing.B) {
	benchQuantize(b, prevQuantizeRowQ2_0, BlockQ2_0, BlockBytesQ2_0)
}
