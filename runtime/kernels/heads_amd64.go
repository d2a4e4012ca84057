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

// dotHeadsSlotsAVX2 takes the head sizes 64 and 128 in assembly.
func dotHeadsSlotsAVX2(n int, k []float32, kstride, d int, qt []float32, tokens int, out []float32, ostride int) {
	switch d {
	case 64:
		dotHeadsSlots64Asm(unsafe.Pointer(&k[0]), 4*kstride, n, unsafe.Pointer(&qt[0]), tokens, unsafe.Pointer(&out[0]), 4*ostride)
	case 128:
		dotHeadsSlots128Asm(unsafe.Pointer(&k[0]), 4*kstride, n, unsafe.Pointer(&qt[0]), tokens, unsafe.Pointer(&out[0]), 4*ostride)
	default:
		dotHeadsSlotsGo(n, k, kstride, d, qt, tokens, out, ostride)
	}
}

//go:noescape
func dotHeadsSlots64Asm(k unsafe.Pointer, kstride, n int, qt unsafe.Pointer, tokens int, out unsafe.Pointer, ostride int)

//go:noescape
func dotHeadsSlots128Asm(k unsafe.Pointer, kstride, n int, qt unsafe.Pointer, tokens int, out unsafe.Pointer, ostride int)

//go:noescape
func dotHeadsAsm(k, qt unsafe.Pointer, n, tokens int, out unsafe.Pointer, outStride int)
