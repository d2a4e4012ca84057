//go:build !purego

package kernels

import "unsafe"

// dotHeadsAVX2 takes the head sizes 64 and 128 (nearly every model's);
// others go the Go way.
func dotHeadsAVX2(k, qt []float32, tokens int, out []float32, outStride int) {
	if n := len(k); n == 64 || n == 128 {
		dotHeadsAsm(unsafe.Pointer(&k[0]), unsafe.Pointer(&qt[0]), n, tokens, unsafe.Pointer(&out[0]), 4*outStride)
		return
	}
	dotHeadsGo(k, qt, tokens, out, outStride)
}

//go:noescape
func dotHeadsAsm(k, qt unsafe.Pointer, n, tokens int, out unsafe.Pointer, outStride int)
