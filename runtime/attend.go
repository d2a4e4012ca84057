package runtime

import (
	"math"
	"sync"

	"github.com/qnnprep/qnnprep/runtime/kernels"
)

// Attention over the cache is memory-bound at depth: every query head of a
// GQA group reads the same K and V rows. attendBlock therefore walks the
// slots once for a block of tokens and all query heads sharing one KV
// head, using each K and V row for every (token, head) pair while it is in
// L1. Each pair's arithmetic is exactly attend's (scores in slot order, an
// exact softmax with a float64 sum, o = Σ p_j v_j in slot order), so the
// result does not depend on the block, the split over threads or T.

// attnTokens is how many tokens one attendBlock call takes: enough to
// reuse each cache row across tokens in prefill, few enough that the
// per-pair scores stay small.
const attnTokens = 8

// attnPrefetch is how many slots ahead the walk prefetches the K or V
// row, which at depth comes from DRAM. (A KV head's rows are contiguous
// in the cache, which the hardware prefetcher follows too; they were
// strided by kv_heads·head_dim before the cache went head-major.)
const attnPrefetch = 16

// attnWork is one worker's scratch: scores [slot][pair], per-pair max
// and sum, and the weights of one V row.
type attnWork struct {
	scores []float32
	mx     []float32
	coef   []float32
	sum    []float64
	qt     []float32 // the block's query heads laid out for kernels.DotHeads
}

var attnPool = sync.Pool{New: func() any { return new(attnWork) }}

// blockSpan is the geometry of a block of tokens [i0, i1) over n slots:
// tb tokens, pairs (token, query head) pairs for a KV group of group
// heads, and the last slot any token sees (past+i1−1 causally, every
// slot under a mask).
func blockSpan(n, i0, i1, group, past int, masked bool) (tb, pairs, last int) {
	tb = i1 - i0
	last = past + i1 - 1
	if masked {
		last = n - 1
	}
	return tb, tb * group, last
}

// attendBlock computes tokens [i0, i1) × the query heads of KV head g.
// q and o are [token][nh][d] (token 0 of the batch at index 0); k and v
// are KV head g's cache rows, [slot][d]. Token i sees slots j ≤ past+i
// (mask nil) or the slots its mask row allows.
func attendBlock(w *attnWork, q, k, v, o []float32, i0, i1, g, nh, group, d, past int, mask []bool, scale float32) {
	n := len(k) / d
	tb, pairs, last := blockSpan(n, i0, i1, group, past, mask != nil)
	if cap(w.scores) < (last+1)*pairs {
		// Doubling: decoding needs one more slot per token.
		w.scores = make([]float32, (last+1)*pairs, max((last+1)*pairs, 2*cap(w.scores)))
	}
	scores := w.scores[:(last+1)*pairs]
	if cap(w.mx) < pairs {
		w.mx, w.coef, w.sum = make([]float32, pairs), make([]float32, pairs), make([]float64, pairs)
	}
	mx, sum := w.mx[:pairs], w.sum[:pairs]
	for r := range mx {
		mx[r] = float32(math.Inf(-1))
		sum[r] = 0
	}
	// allowed reports whether token i0+ti sees slot j.
	allowed := func(ti, j int) bool {
		if mask == nil {
			return j <= past+i0+ti
		}
		return mask[(i0+ti)*n+j]
	}
	h0 := g * group
	// With a GQA group of kernels.HeadGroup heads and no mask, a slot's
	// scores for the tokens that see it (a suffix of the block) come from
	// one DotHeads call, lanes over the heads: the same bits as DotRows.
	var qt []float32
	if group == kernels.HeadGroup && mask == nil {
		qt = growF32(w.qt, tb*d*group)
		w.qt = qt
		for ti := range tb {
			kernels.TransposeHeads(qt[ti*d*group:(ti+1)*d*group], q[((i0+ti)*nh+h0)*d:], 1, d, d)
		}
	}
	// Slots up to full are seen by every pair of the block (all of the
	// cache before it, without a mask).
	full := min(past+i0, last)
	if mask != nil {
		full = -1
	}
	j0 := 0
	if full >= 0 {
		// One call for all of them: per slot and token, the calls cost
		// more than the arithmetic.
		if qt != nil {
			kernels.DotHeadsSlots(full+1, k, d, d, qt, tb, scores, pairs)
		} else {
			qb := (i0*nh + h0) * d
			kernels.DotRowsSlots(full+1, k, d, d, q[qb:], nh*d, tb, group, scores, pairs)
		}
		j0 = full + 1
	}
	for j := j0; j <= last; j++ {
		if jp := j + attnPrefetch; jp <= last {
			kernels.Prefetch(k[jp*d : (jp+1)*d])
		}
		kj := k[j*d : (j+1)*d]
		s := scores[j*pairs : (j+1)*pairs]
		if qt != nil {
			if lo := max(0, j-past-i0); lo < tb {
				kernels.DotHeads(kj, qt[lo*d*group:], tb-lo, s[lo*group:], group)
			}
			continue
		}
		for ti := 0; ti < tb; ti++ {
			if !allowed(ti, j) {
				continue
			}
			qb := ((i0+ti)*nh + h0) * d
			kernels.DotRows(kj, q[qb:qb+group*d], s[ti*group:(ti+1)*group])
		}
	}
	// The slots up to full go through the vector row operations, the few
	// others pair by pair with the same arithmetic. A slot a pair may not
	// see becomes −Inf before the exponentials, so e^−Inf = +0 leaves its
	// sum unchanged.
	head := scores[:(full+1)*pairs]
	negInf := float32(math.Inf(-1))
	kernels.ScaleMaxRows(head, scale, mx)
	for j := full + 1; j <= last; j++ {
		s := scores[j*pairs : (j+1)*pairs]
		for ti := 0; ti < tb; ti++ {
			if !allowed(ti, j) {
				continue
			}
			for r := ti * group; r < (ti+1)*group; r++ {
				sv := s[r] * scale
				s[r] = sv
				if sv > mx[r] {
					mx[r] = sv
				}
			}
		}
	}
	kernels.SubRows(head, mx)
	for j := full + 1; j <= last; j++ {
		s := scores[j*pairs : (j+1)*pairs]
		for ti := 0; ti < tb; ti++ {
			ok := allowed(ti, j)
			for r := ti * group; r < (ti+1)*group; r++ {
				if ok {
					s[r] -= mx[r]
				} else {
					s[r] = negInf
				}
			}
		}
	}
	kernels.Exp(scores)
	kernels.SumRowsF64(sum, scores)
	// mx now holds 1/sum per pair, and the scores become the weights.
	for r := range mx {
		mx[r] = float32(1 / sum[r])
	}
	kernels.MulRows(scores, mx)
	// o += Σ_j p_j v_j in slot order: the shared slots in tiles whose V
	// rows stay in L1 across the block's tokens, then the rest.
	for j0 := 0; j0 <= full; j0 += attnSlotTile {
		nt := min(attnSlotTile, full+1-j0)
		for ti := 0; ti < tb; ti++ {
			ob := ((i0+ti)*nh + h0) * d
			kernels.AxpySlots(nt, scores[j0*pairs+ti*group:], pairs, v[j0*d:], d, o[ob:ob+group*d], group)
		}
	}
	for j := full + 1; j <= last; j++ {
		vj := v[j*d : (j+1)*d]
		s := scores[j*pairs : (j+1)*pairs]
		for ti := 0; ti < tb; ti++ {
			if !allowed(ti, j) {
				continue
			}
			ob := ((i0+ti)*nh + h0) * d
			kernels.AxpyRows(s[ti*group:(ti+1)*group], vj, o[ob:ob+group*d])
		}
	}
}

// attnSlotTile is how many slots' V rows one AxpySlots call walks: 128
// rows of a 128-wide head are 64 KiB of cache lines at most, read once
// per token of the block.
const attnSlotTile = 128

// flashBlock is attendBlock for Options.KVF16: each (token, head) pair of
// the block runs flashF16's online softmax over the slots in order (the
// running output held in binary16, the running sum in float32, one final
// division). The slots go in tiles whose K and V rows stay in L1 while
// every token of the block walks them, each token's run of slots in a
// tile (its allowed ones, a few runs under a mask) in one
// kernels.FlashF16 call for the whole head group.
func flashBlock(w *attnWork, q, k, v, o []float32, i0, i1, g, nh, group, d, past int, mask []bool, scale float32) {
	n := len(k) / d
	tb, pairs, last := blockSpan(n, i0, i1, group, past, mask != nil)
	if cap(w.mx) < pairs {
		w.mx, w.coef, w.sum = make([]float32, pairs), make([]float32, pairs), make([]float64, pairs)
	}
	m, sum := w.mx[:pairs], w.coef[:pairs]
	for r := range m {
		m[r] = float32(math.Inf(-1))
		sum[r] = 0
	}
	h0 := g * group
	// A tile's K and V rows take about 32 KiB.
	tile := max(1, 4096/max(d, 1))
	for j0 := 0; j0 <= last; j0 += tile {
		j1 := min(j0+tile, last+1)
		for ti := 0; ti < tb; ti++ {
			i := i0 + ti
			qb := (i*nh + h0) * d
			mr, sr := m[ti*group:(ti+1)*group], sum[ti*group:(ti+1)*group]
			for j := j0; j < j1; {
				// The next run [j, e) of slots token i sees.
				var e int
				if mask == nil {
					j1c := min(j1, past+i+1)
					if j >= j1c {
						break
					}
					e = j1c
				} else {
					row := mask[i*n : (i+1)*n]
					for j < j1 && !row[j] {
						j++
					}
					for e = j; e < j1 && row[e]; e++ {
					}
					if j == e {
						break
					}
				}
				kernels.FlashF16(q[qb:qb+group*d], k[j*d:], v[j*d:], d, e-j, d, scale, mr, sr, o[qb:qb+group*d])
				j = e
			}
		}
	}
	for i := i0; i < i1; i++ {
		for hh := 0; hh < group; hh++ {
			qb := (i*nh + h0 + hh) * d
			kernels.Scale(1/sum[(i-i0)*group+hh], o[qb:qb+d])
		}
	}
}
