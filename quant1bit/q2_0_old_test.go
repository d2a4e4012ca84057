package quant1bit

// The previous Q2_0 search (full sort and sweep from zero), kept as a
// reference for the tests of the pruned search.

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/internal/half"
)

func oldQuantizeRowQ2_0(src []float32, dst []byte) {
	for b := 0; b*BlockQ2_0 < len(src); b++ {
		oldQuantizeBlockQ2_0(src[b*BlockQ2_0:(b+1)*BlockQ2_0], dst[b*BlockBytesQ2_0:(b+1)*BlockBytesQ2_0])
	}
}

func oldQuantizeBlockQ2_0(x []float32, y []byte) {
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
	var s oldQ2Search
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

// oldQ2Search holds one block's magnitudes sorted ascending, with signs, and
// the best candidate so far.
type oldQ2Search struct {
	ax   [BlockQ2_0]float64 // |x| ascending, zeros dropped
	ax2  [BlockQ2_0]float64 // 2|x|: where code ±1 gives way to 0
	ax3  [BlockQ2_0]float64 // 2|x|/3: where code 2 gives way to 1
	neg  [BlockQ2_0]bool    // x < 0 for the same element
	n    int
	syy  float64 // Σx²
	best q2Candidate
}

func (q *oldQ2Search) init(x []float32) {
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
func (q *oldQ2Search) sweep() {
	var sxc, scc [2]float64 // [positive d, negative d]
	for k := range q.n {
		p := oldB2i(q.neg[k]) // the sign for which y > 0
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
			p := oldB2i(q.neg[ia])
			sxc[p] -= q.ax[ia]
			scc[p] -= 3
			ia++
		}
		lo = hi
	}
}

func oldB2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// interval scores the fp16 neighbours of the error parabola's vertex,
// clamped to [lo, hi], for one sign of d. The vertex value
// syy − sxc²/scc bounds the interval's error from below, so most
// intervals are skipped without a division.
func (q *oldQ2Search) interval(lo, hi, sxc, scc float64, neg bool) {
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
func (q *oldQ2Search) try(h uint16, neg bool, sxc, scc float64) {
	if h >= f16Inf {
		return
	}
	s := float64(half.F16ToF32(h))
	if e := q.syy - float64(2*s*sxc) + float64(float64(s*s)*scc); e < q.best.err {
		q.best = q2Candidate{h: h, neg: neg, err: e}
	}
}

// TestQ2ErrMatchesQ2Error checks the threshold-coded error against
// q2Error, bit for bit, at scales around every element's breakpoints.
func TestQ2ErrMatchesQ2Error(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for it := range 300 {
		x := randomBlock(r, BlockQ2_0)
		var q q2Search
		q.init(x)
		for _, v := range x[:8] {
			for _, f := range []float64{2, 2.0 / 3, 1, 0.7, 1.3} {
				h := half.F32ToF16(float32(math.Abs(float64(v)) * f))
				for _, hh := range []uint16{h - 1, h, h + 1} {
					if hh >= f16Inf {
						continue
					}
					for _, neg := range []bool{false, true} {
						d := q2Candidate{h: hh, neg: neg}.d()
						if a, b := q.err(d), q2Error(x, d); math.Float64bits(a) != math.Float64bits(b) {
							t.Fatalf("block %d d=%v: err %v, q2Error %v", it, d, a, b)
						}
					}
				}
			}
		}
	}
}

// TestQ2_0MatchesOldSearch compares the pruned search with the previous
// full sweep on many blocks: never a larger error, and it reports how
// often the chosen bytes differ.
func TestQ2_0MatchesOldSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b := make([]byte, BlockBytesQ2_0), make([]byte, BlockBytesQ2_0)
	diff, worse, better := 0, 0, 0
	const n = 20000
	for range n {
		x := randomBlock(r, BlockQ2_0)
		QuantizeRowQ2_0(x, a)
		oldQuantizeRowQ2_0(x, b)
		if string(a) != string(b) {
			diff++
			ea, eb := storedQ2Error(t, x, a), storedQ2Error(t, x, b)
			if ea < eb {
				better++
			}
			if ea > eb {
				worse++
				t.Errorf("block %v: error %g, old search %g", x, ea, eb)
			}
		}
	}
	t.Logf("%d of %d blocks encode differently from the old search: %d with a smaller error, %d worse, the rest equal", diff, n, better, worse)
}

// TestQ2EncodeMatchesQ2Code checks the threshold encoder against rounding
// x/d with q2Code, for scales around the elements' breakpoints.
func TestQ2EncodeMatchesQ2Code(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	got := make([]byte, BlockBytesQ2_0)
	for it := range 300 {
		x := randomBlock(r, BlockQ2_0)
		for _, v := range x[:8] {
			for _, f := range []float64{0, 2, 2.0 / 3, 1, 0.7} {
				h := half.F32ToF16(float32(math.Abs(float64(v)) * f))
				for _, hh := range []uint16{h - 1, h, h + 1} {
					if hh >= f16Inf {
						continue
					}
					for _, neg := range []bool{false, true} {
						c := q2Candidate{h: hh, neg: neg}
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
	}
}

func BenchmarkQuantizeRowQ2_0Old(b *testing.B) {
	benchQuantize(b, oldQuantizeRowQ2_0, BlockQ2_0, BlockBytesQ2_0)
}

// TestQ2ErrAsmMatchesGo compares the chosen error kernel with the Go loop
// bit for bit.
func TestQ2ErrAsmMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	for it := range 2000 {
		x := randomBlock(r, BlockQ2_0)
		var q q2Search
		q.init(x)
		for _, v := range x[:4] {
			for _, f := range []float64{2, 2.0 / 3, 1, 0.4} {
				h := half.F32ToF16(float32(math.Abs(float64(v)) * f))
				if h == 0 || h >= f16Inf {
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
}
