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
const attnTokens = 4

// attnPrefetch is how many slots ahead the walk prefetches the K or V
// row: the rows of one KV head are strided, so the hardware prefetcher
// misses them, and at depth they come from DRAM.
const attnPrefetch = 16

// attnWork is one worker's scratch: scores [slot][pair], per-pair max
// and sum, and the weights of one V row.
type attnWork struct {
	scores []float32
	mx     []float32
	coef   []float32
	sum    []float64
}

var attnPool = sync.Pool{New: func() any { return new(attnWork) }}

// attendBlock computes tokens [i0, i1) × the query heads of KV head g.
// q and o are [token][nh][d] (token 0 of the batch at index 0); k and v
// are [slot][stride] with KV head g at offset g·d. Token i sees slots
// j ≤ past+i (mask nil) or the slots its mask row allows.
func attendBlock(w *attnWork, q, k, v, o []float32, i0, i1, g, nh, group, d, stride, past int, mask []bool, scale float32) {
	n := len(k) / stride
	tb := i1 - i0
	pairs := tb * group
	last := past + i1 - 1
	if mask != nil {
		last = n - 1
	}
	if cap(w.scores) < (last+1)*pairs {
		w.scores = make([]float32, (last+1)*pairs)
	}
	scores := w.scores[:(last+1)*pairs]
	if cap(w.mx) < pairs {
		w.mx, w.coef, w.sum = make([]float32, pairs), make([]float32, pairs), make([]float64, pairs)
	}
	mx, coef, sum := w.mx[:pairs], w.coef[:pairs], w.sum[:pairs]
	for r := range mx {
		mx[r] = float32(math.Inf(-1))
		sum[r] = 0
	}
	off := g * d
	// allowed reports whether token i0+ti sees slot j.
	allowed := func(ti, j int) bool {
		if mask == nil {
			return j <= past+i0+ti
		}
		return mask[(i0+ti)*n+j]
	}
	h0 := g * group
	for j := 0; j <= last; j++ {
		if jp := j + attnPrefetch; jp <= last {
			kernels.Prefetch(k[jp*stride+off : jp*stride+off+d])
		}
		kj := k[j*stride+off : j*stride+off+d]
		s := scores[j*pairs : (j+1)*pairs]
		for ti := 0; ti < tb; ti++ {
			if !allowed(ti, j) {
				continue
			}
			qb := ((i0+ti)*nh + h0) * d
			kernels.DotRows(kj, q[qb:qb+group*d], s[ti*group:(ti+1)*group])
			for r := ti * group; r < (ti+1)*group; r++ {
				sv := s[r] * scale
				s[r] = sv
				if sv > mx[r] {
					mx[r] = sv
				}
			}
		}
	}
	for j := 0; j <= last; j++ {
		s := scores[j*pairs : (j+1)*pairs]
		for ti := 0; ti < tb; ti++ {
			if !allowed(ti, j) {
				continue
			}
			for r := ti * group; r < (ti+1)*group; r++ {
				p := expf(s[r] - mx[r])
				s[r] = p
				sum[r] += float64(p)
			}
		}
	}
	// mx now holds 1/sum per pair.
	for r := range mx {
		mx[r] = float32(1 / sum[r])
	}
	for j := 0; j <= last; j++ {
		if jp := j + attnPrefetch; jp <= last {
			kernels.Prefetch(v[jp*stride+off : jp*stride+off+d])
		}
		vj := v[j*stride+off : j*stride+off+d]
		s := scores[j*pairs : (j+1)*pairs]
		for ti := 0; ti < tb; ti++ {
			if !allowed(ti, j) {
				continue
			}
			for r := ti * group; r < (ti+1)*group; r++ {
				coef[r] = s[r] * mx[r]
			}
			ob := ((i0+ti)*nh + h0) * d
			kernels.AxpyRows(coef[ti*group:(ti+1)*group], vj, o[ob:ob+group*d])
		}
	}
}
