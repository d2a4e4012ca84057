package kernels

import "fmt"

// Attention scores for a prompt with lanes over query heads. Eight query
// heads share a key under grouped-query attention; with their vectors laid
// out transposed (element i of heads 0..7 adjacent, TransposeHeads), each
// key element is broadcast against them and every vector operation serves
// eight dot products, where Dot's form (lanes over elements) ends each one
// with a horizontal reduction. The operations per dot product are Dot's.

// HeadGroup is the number of query heads DotHeads serves at once.
const HeadGroup = 8

// TransposeHeads lays out tokens·HeadGroup head vectors of n elements
// (vector h of token t at q[(t·HeadGroup+h)·stride:], stride ≥ n) as
// dst[(t·n+i)·HeadGroup+h] = element i of that vector, for DotHeads. It
// panics if dst or q is too short.
func TransposeHeads(dst, q []float32, tokens, n, stride int) {
	if stride < n || tokens < 0 || len(dst) < tokens*n*HeadGroup || tokens > 0 && len(q) < ((tokens*HeadGroup-1)*stride+n) {
		panic(fmt.Sprintf("kernels: TransposeHeads: %d tokens of %d heads of %d elements at stride %d: dst %d, q %d", tokens, HeadGroup, n, stride, len(dst), len(q)))
	}
	for t := range tokens {
		for h := range HeadGroup {
			src := q[(t*HeadGroup+h)*stride : (t*HeadGroup+h)*stride+n]
			d := dst[t*n*HeadGroup+h:]
			for i, v := range src {
				d[i*HeadGroup] = v
			}
		}
	}
}

// DotHeads sets out[t·outStride+h] = Dot(k, head h of token t) for t <
// tokens and h < HeadGroup, bit for bit, with qt laid out by
// TransposeHeads for n = len(k). It panics if qt or out is too short.
func DotHeads(k, qt []float32, tokens int, out []float32, outStride int) {
	n := len(k)
	if tokens <= 0 {
		return
	}
	if len(qt) < tokens*n*HeadGroup || outStride < HeadGroup || len(out) < (tokens-1)*outStride+HeadGroup {
		panic(fmt.Sprintf("kernels: DotHeads: %d tokens of %d elements: qt %d, out %d at stride %d", tokens, n, len(qt), len(out), outStride))
	}
	if n == 0 {
		for t := range tokens {
			clear(out[t*outStride : t*outStride+HeadGroup])
		}
		return
	}
	dotHeads(k, qt, tokens, out, outStride)
}

// dotHeads is the kernel chosen at init; the arguments are checked.
var dotHeads = dotHeadsGo

func dotHeadsGo(k, qt []float32, tokens int, out []float32, outStride int) {
	n := len(k)
	col := make([]float32, n)
	for t := range tokens {
		for h := range HeadGroup {
			for i := range col {
				col[i] = qt[(t*n+i)*HeadGroup+h]
			}
			out[t*outStride+h] = dotF32Go(k, col)
		}
	}
}

// DotHeadsSlots computes attention scores for n cache slots in one call:
// for each slot j < n in order,
//
//	DotHeads(k[j·kstride : j·kstride+d], qt, tokens, out[j·ostride:], HeadGroup)
//
// bit for bit. One call per range of slots replaces one per slot, and the
// assembly prefetches the key rows ahead (strided in the cache). It
// panics if an operand is too short.
func DotHeadsSlots(n int, k []float32, kstride, d int, qt []float32, tokens int, out []float32, ostride int) {
	if n <= 0 || tokens <= 0 {
		return
	}
	if d < 0 || kstride < d || (n-1)*kstride+d > len(k) || len(qt) < tokens*d*HeadGroup ||
		ostride < tokens*HeadGroup || (n-1)*ostride+tokens*HeadGroup > len(out) {
		panic(fmt.Sprintf("kernels: DotHeadsSlots: %d slots × %d tokens of %d: k %d (stride %d), qt %d, out %d (stride %d)",
			n, tokens, d, len(k), kstride, len(qt), len(out), ostride))
	}
	if d == 0 {
		for j := range n {
			clear(out[j*ostride : j*ostride+tokens*HeadGroup])
		}
		return
	}
	dotHeadsSlots(n, k, kstride, d, qt, tokens, out, ostride)
}

var dotHeadsSlots = dotHeadsSlotsGo

// dotHeadsSlotsGo is DotHeadsSlots' definition (the arguments are
// checked).
func dotHeadsSlotsGo(n int, k []float32, kstride, d int, qt []float32, tokens int, out []float32, ostride int) {
	for j := range n {
		dotHeadsGo(k[j*kstride:j*kstride+d], qt, tokens, out[j*ostride:], HeadGroup)
	}
}
