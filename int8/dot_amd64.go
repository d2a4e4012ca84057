package int8

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C {
		dotQ8_0 = dotQ8_0AVX2
	}
}

func dotQ8_0AVX2(w, x []byte, nb int) float32 {
	return dotQ8_0Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), nb)
}

//go:noescape
func dotQ8_0Asm(w, x unsafe.Pointer, nb int) float32
