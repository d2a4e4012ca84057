//go:build !purego

package int8

// tokensImpls are the implementations of dotQ8_0SymRowsTokens this CPU
// runs, by kernel set.
func tokensImpls() map[string]func(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	m := map[string]func(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int){
		"go": rowsTokensGo, "blocks": rowsTokensBlocks,
	}
	if hasAVX2 {
		m["avx2"] = dotQ8_0RowsTokensAVX2
	}
	if hasAVXVNNI {
		m["avx2+avxvnni"] = dotQ8_0RowsTokensAVXVNNI
	}
	if hasAVX512 {
		m["avx512"] = dotQ8_0RowsTokensAVX512
	}
	return m
}
