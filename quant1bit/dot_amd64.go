package quant1bit

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C {
		dotQ1_0 = dotQ1_0AVX2
		dotQ2_0 = dotQ2_0AVX2
	}
}

func dotQ1_0AVX2(w, x []byte, nb int) float32 {
	return dotQ1_0Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), nb)
}

func dotQ2_0AVX2(w, x []byte, nb int) float32 {
	return dotQ2_0Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), nb)
}

//go:noescape
func dotQ1_0Asm(w, x unsafe.Pointer, nb int) float32

//go:noescape
func dotQ2_0Asm(w, x unsafe.Pointer, nb int) float32
