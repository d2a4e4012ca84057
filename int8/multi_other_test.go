//go:build !amd64 || purego

package int8

func tokensImpls() map[string]func(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	return map[string]func(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int){
		"go": rowsTokensGo, "blocks": rowsTokensBlocks,
	}
}
