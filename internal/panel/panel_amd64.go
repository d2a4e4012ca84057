//go:build !purego

package panel

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAsm tells whether the CPU runs the assembly: AVX2, and F16C for
// VCVTPH2PS.
var hasAsm = cpu.X86.HasAVX2 && cpu.X86.HasF16C

func q8_0(w []byte, rowBytes, nb int, codes []int16, d []float32) {
	if !hasAsm {
		q8_0Go(w, rowBytes, nb, codes, d)
		return
	}
	q8_0Asm(unsafe.Pointer(&w[0]), rowBytes, nb, unsafe.Pointer(&codes[0]), unsafe.Pointer(&d[0]))
}

func f16(w []byte, rowBytes, m int, dst []float32, lanes int) {
	halfAsm(f16Go, f16x8Asm, f16x16Asm, w, rowBytes, m, dst, lanes)
}

func bf16(w []byte, rowBytes, m int, dst []float32, lanes int) {
	halfAsm(bf16Go, bf16x8Asm, bf16x16Asm, w, rowBytes, m, dst, lanes)
}

// halfAsm runs the assembly layout for lanes (x8 or x16), or goTwin on a
// CPU without it.
func halfAsm(goTwin func([]byte, int, int, []float32, int), x8, x16 func(w unsafe.Pointer, rowBytes, m int, dst unsafe.Pointer),
	w []byte, rowBytes, m int, dst []float32, lanes int) {
	switch {
	case !hasAsm:
		goTwin(w, rowBytes, m, dst, lanes)
	case lanes == 16:
		x16(unsafe.Pointer(&w[0]), rowBytes, m, unsafe.Pointer(&dst[0]))
	default:
		x8(unsafe.Pointer(&w[0]), rowBytes, m, unsafe.Pointer(&dst[0]))
	}
}

//go:noescape
func q8_0Asm(w unsafe.Pointer, rowBytes, nb int, codes, d unsafe.Pointer)

//go:noescape
func f16x8Asm(w unsafe.Pointer, rowBytes, m int, dst unsafe.Pointer)

//go:noescape
func f16x16Asm(w unsafe.Pointer, rowBytes, m int, dst unsafe.Pointer)

//go:noescape
func bf16x8Asm(w unsafe.Pointer, rowBytes, m int, dst unsafe.Pointer)

//go:noescape
func bf16x16Asm(w unsafe.Pointer, rowBytes, m int, dst unsafe.Pointer)
