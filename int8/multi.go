package int8

import "fmt"

// DotQ8_0SymRowsTokens sets out[k*outStride+r] = DotQ8_0Sym(w[r*rowBytes:],
// x[k*xStride:], n) for every token k < tokens and row r < rows: a short
// batch's decoding products, bit for bit those of DotQ8_0SymRows per
// token (so a speculative verify window gives the logits of decoding
// token by token). With AVX-512 or AVX2 each weight row is read once for
// two or three tokens (see dotQ8_0RowsTokensAVX512 and
// dotQ8_0RowsTokensAVX2); elsewhere the row kernel runs per token over
// 256 KiB blocks of rows, each read from memory once and from cache by
// the later tokens. It panics if the rows, tokens or outputs do not fit
// or overlap.
func DotQ8_0SymRowsTokens(w []byte, rowBytes, rows int, x []byte, xStride, tokens, n int, out []float32, outStride int) {
	if rows < 0 || tokens < 0 {
		panic(fmt.Sprintf("int8: DotQ8_0SymRowsTokens: %d rows, %d tokens", rows, tokens))
	}
	if rows == 0 || tokens == 0 {
		return
	}
	if rowBytes < 0 || rowBytes*(rows-1) > len(w) {
		panic(fmt.Sprintf("int8: DotQ8_0SymRowsTokens: %d rows of %d bytes do not fit in %d", rows, rowBytes, len(w)))
	}
	if xStride < 0 || xStride*(tokens-1) > len(x) {
		panic(fmt.Sprintf("int8: DotQ8_0SymRowsTokens: %d tokens %d bytes apart do not fit in %d", tokens, xStride, len(x)))
	}
	nb := checkDot("DotQ8_0SymRowsTokens", w[rowBytes*(rows-1):], x[xStride*(tokens-1):], n)
	if rows > 1 && rowBytes < nb*BlockBytesQ8_0 || tokens > 1 && xStride < nb*BlockBytesQ8_0 {
		panic(fmt.Sprintf("int8: DotQ8_0SymRowsTokens: rows of %d bytes or tokens of %d are shorter than %d elements", rowBytes, xStride, n))
	}
	if tokens > 1 && outStride < rows || outStride*(tokens-1)+rows > len(out) {
		panic(fmt.Sprintf("int8: DotQ8_0SymRowsTokens: %d tokens of %d outputs, %d apart, do not fit in %d", tokens, rows, outStride, len(out)))
	}
	if nb == 0 {
		for k := range tokens {
			clear(out[k*outStride : k*outStride+rows])
		}
		return
	}
	dotQ8_0SymRowsTokens(w, rowBytes, rows, x, xStride, tokens, nb, out, outStride)
}

// dotQ8_0SymRowsTokens is the kernel chosen at init; the arguments are
// checked.
var dotQ8_0SymRowsTokens = rowsTokensBlocks

// tokensBlockBytes is how many bytes of weight rows rowsTokensBlocks
// takes at a time: within a core's L2 on current x86 CPUs.
const tokensBlockBytes = 256 << 10

// rowsTokensBlocks runs the row kernel per token over blocks of rows.
func rowsTokensBlocks(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	step := max(16, tokensBlockBytes/max(rowBytes, 1)&^7)
	for b0 := 0; b0 < rows; b0 += step {
		b1 := min(b0+step, rows)
		for k := range tokens {
			dotQ8_0SymRows(w[b0*rowBytes:], rowBytes, x[k*xStride:], nb, out[k*outStride+b0:k*outStride+b1])
		}
	}
}

// rowsTokensGo is dotQ8_0SymRowsTokens in Go: the twin of the kernels.
func rowsTokensGo(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	for k := range tokens {
		rowsGo(w, rowBytes, x[k*xStride:], nb, out[k*outStride:k*outStride+rows])
	}
}
