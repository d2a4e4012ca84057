package kernels

import (
	"fmt"

	"github.com/qnnprep/qnnprep/internal/half"
)

// DotF16F32RowsMulti sets out[t·ldo+r] = DotF16F32(w[r·rowBytes:],
// x[t·n:(t+1)·n]) for r < rows and t < len(x)/n, bit for bit: the rows of a
// short batch (a few prompt tokens, a speculative verify window) in one
// call that reads each weight row once and widens each weight once for up
// to three tokens, instead of DotF16F32Rows once per token. len(x) must be
// a multiple of n; the activations are binary16 values as for DotF16F32.
// It panics if the rows do not fit in w or the results in out.
func DotF16F32RowsMulti(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
	rowsMulti("DotF16F32RowsMulti", dotF16F32Rows, dotF16F32RowsMulti, w, rowBytes, rows, x, n, out, ldo)
}

// DotBF16F32RowsMulti is DotF16F32RowsMulti for bfloat16 weights and
// activations: out[t·ldo+r] = DotBF16F32(w[r·rowBytes:], x[t·n:(t+1)·n]).
func DotBF16F32RowsMulti(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
	rowsMulti("DotBF16F32RowsMulti", dotBF16F32Rows, dotBF16F32RowsMulti, w, rowBytes, rows, x, n, out, ldo)
}

// rowsMulti checks a RowsMulti call and runs it in groups of up to three
// tokens: one token on the decoding kernel one, 2 or 3 on multi.
func rowsMulti(name string, one func(w []byte, rowBytes int, x, out []float32), multi multiKernelFunc,
	w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
	if rows <= 0 || len(x) == 0 {
		return
	}
	if n <= 0 || len(x)%n != 0 {
		panic(fmt.Sprintf("kernels: %s: %d activations are not tokens of %d", name, len(x), n))
	}
	tokens := len(x) / n
	if rowBytes < 2*n || (rows-1)*rowBytes+2*n > len(w) {
		panic(fmt.Sprintf("kernels: %s: %d rows of %d elements at stride %d do not fit in %d bytes", name, rows, n, rowBytes, len(w)))
	}
	if ldo < rows || (tokens-1)*ldo+rows > len(out) {
		panic(fmt.Sprintf("kernels: %s: %d tokens of %d results at stride %d do not fit in %d", name, tokens, rows, ldo, len(out)))
	}
	for t := 0; t < tokens; {
		g := min(tokens-t, 3)
		if g == 1 {
			one(w, rowBytes, x[t*n:(t+1)*n], out[t*ldo:t*ldo+rows])
		} else {
			multi(w, rowBytes, rows, x[t*n:(t+g)*n], n, out[t*ldo:], ldo)
		}
		t += g
	}
}

// multiKernelFunc is a multi-token rows kernel (2 or 3 tokens, len(x)/n).
type multiKernelFunc = func(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int)

// dotF16F32RowsMulti and dotBF16F32RowsMulti take 2 or 3 tokens (len(x)/n).
var (
	dotF16F32RowsMulti  = dotF16F32RowsMultiGo
	dotBF16F32RowsMulti = dotBF16F32RowsMultiGo
)

// dotBF16F32RowsMultiGo is the BF16 multi-token twin: DotBF16F32's
// definition per row and token (with -tags purego, speed aside).
func dotBF16F32RowsMultiGo(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
	for t := range len(x) / n {
		rowsEach(dotBF16F32, w, rowBytes, x[t*n:(t+1)*n], out[t*ldo:t*ldo+rows])
	}
}

// dotF16F32RowsMultiGo is the twin of the multi-token kernels: each
// weight widened once, then its product with each token's activation
// added to that token's partial sums, in dotF16F32Go's order per token.
func dotF16F32RowsMultiGo(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
	tokens := len(x) / n
	var l [3]lanes
	for r := range rows {
		wr := u16View(w[r*rowBytes:], n)
		l = [3]lanes{}
		i := 0
		for ; i+32 <= n; i += 32 {
			for j := range 32 {
				wv := half.F16ToF32(wr[i+j])
				for t := range tokens {
					l[t][j] += float32(wv * x[t*n+i+j])
				}
			}
		}
		for ; i < n; i++ {
			wv := half.F16ToF32(wr[i])
			for t := range tokens {
				l[t][i%8] += float32(wv * x[t*n+i])
			}
		}
		for t := range tokens {
			out[t*ldo+r] = l[t].sum()
		}
	}
}
