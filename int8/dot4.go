package int8

import "fmt"

// Four dot products in one pass. Each is DotQ8_0Sym's float32 sequence
// (sum += float32(s)·(w.d·x.d), block by block) computed in its own lane,
// so the results are bit for bit those of four DotQ8_0Sym calls; the
// lanes share the weight loads and hide the latency of the serial sum,
// which bounds a single dot product.

// DotQ8_0SymTokens4 sets out[i] = DotQ8_0Sym(w, x[i*xstride:], n) for
// i = 0..3: one weight row against four activation rows (prompt
// processing). The activation rows must have no −128 code.
func DotQ8_0SymTokens4(w, x []byte, xstride, n int, out *[4]float32) {
	nb := checkTokens("DotQ8_0SymTokens4", w, x, xstride, n, 4)
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	dotQ8_0SymTokens4(w, x, xstride, nb, out)
}

// DotQ8_0SymTokens8 sets out[i] = DotQ8_0Sym(w, x[i*xstride:], n) for
// i = 0..7, with xd the activation scales as Q8_0Scales8 lays them out.
// The activation rows must have no −128 code.
func DotQ8_0SymTokens8(w, x []byte, xstride int, xd []float32, n int, out *[8]float32) {
	*out = [8]float32{}
	DotQ8_0SymTokens8Add(w, x, xstride, xd, n, out)
}

// DotQ8_0SymTokens8Add is DotQ8_0SymTokens8 continued: each lane's serial
// sum starts from acc[i] instead of +0 and is stored back. Running it over
// consecutive pieces of the rows (weights, activations and scales cut at
// the same block) gives bit for bit the result of one call on the whole
// rows, so a product can be cut along its columns to keep its operands
// in cache.
func DotQ8_0SymTokens8Add(w, x []byte, xstride int, xd []float32, n int, acc *[8]float32) {
	nb := checkTokens("DotQ8_0SymTokens8", w, x, xstride, n, 8)
	if len(xd) < 8*nb {
		panic(fmt.Sprintf("int8: DotQ8_0SymTokens8: %d scales, want %d", len(xd), 8*nb))
	}
	if nb == 0 {
		return
	}
	dotQ8_0SymTokens8(w, x, xstride, xd, nb, acc)
}

// Q8_0Scales8 sets dst[8*b+i] to the scale of block b of activation row i
// (x[i*xstride:]) for i = 0..7 and the first nb blocks: the order in
// which DotQ8_0SymTokens8 reads them.
func Q8_0Scales8(x []byte, xstride, nb int, dst []float32) {
	for i := range 8 {
		row := x[i*xstride:]
		for b := range nb {
			dst[8*b+i] = f16At(row[b*BlockBytesQ8_0:])
		}
	}
}

// checkTokens checks that w holds a row of n elements and x k rows at
// stride xs, and returns the number of blocks.
func checkTokens(name string, w, x []byte, xs, n, k int) int {
	if n < 0 || n%BlockQ8_0 != 0 {
		panic(fmt.Sprintf("int8: %s: %d elements is not a multiple of %d", name, n, BlockQ8_0))
	}
	nb := n / BlockQ8_0
	rb := nb * BlockBytesQ8_0
	if xs < rb {
		panic(fmt.Sprintf("int8: %s: stride %d is shorter than a row of %d bytes", name, xs, rb))
	}
	if need := (k-1)*xs + rb; len(w) < rb || len(x) < need {
		panic(fmt.Sprintf("int8: %s: rows of %d elements need w %d and x %d bytes, have %d and %d",
			name, n, rb, need, len(w), len(x)))
	}
	return nb
}

// The kernels chosen at init; arguments are checked, nb ≥ 1.
var (
	dotQ8_0SymTokens4 = dotQ8_0SymTokens4Go
	dotQ8_0SymTokens8 = dotQ8_0SymTokens8Go
)

func dotQ8_0SymTokens4Go(w, x []byte, xstride, nb int, out *[4]float32) {
	for i := range out {
		out[i] = dotQ8_0Sym(w, x[i*xstride:], nb)
	}
}

func dotQ8_0SymTokens8Go(w, x []byte, xstride int, _ []float32, nb int, acc *[8]float32) {
	for i := range acc {
		acc[i] = dotQ8_0GoFrom(acc[i], w, x[i*xstride:], nb)
	}
}
