//go:build !purego

package quant1bit

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasQuad reports whether the CPU runs the AVX-512 batch kernel: byte
// and word ops, EVEX on 256-bit registers, VPERMT2B (VBMI), VPDPBUSD
// (VNNI) and VPSHUFBITQMB (BITALG).
var hasQuad = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VBMI && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512BITALG

// useQuad makes the AVX-512 kernel DotQ1_0ActsBatch's and
// DotQ1_0ActsRows', with its activation layout in place of the AVX2
// one. The float32 steps are the AVX2 kernel's, so the results are the
// same bits.
func useQuad() {
	dotQ1_0ActsBatch = dotQ1_0ActsBatch512
	dotQ1_0ActsRows = dotQ1_0ActsRows512
	byteLayout, quadLayout = false, true
	kernelSet = "avx512"
}

//go:noescape
func q1Quad4(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Quad3(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Quad2(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Quad1(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1QuadRows4(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1QuadRows3(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1QuadRows2(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1QuadRows1(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
