//go:build !purego

package quant1bit

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasVNNI reports whether the CPU has AVX-VNNI (VEX-encoded VPDPBUSD on
// 256-bit registers), which the AVX-VNNI batch kernel needs besides AVX2
// and F16C; init uses it where the AVX-512 kernel does not run (Intel
// client CPUs since Alder Lake).
var hasVNNI = cpu.X86.HasAVXVNNI

// hasEVNNI reports whether the CPU has the EVEX VPDPBUSD on 256-bit
// registers (AVX512_VNNI and AVX512VL, on AVX512F), which the same
// kernels take in place of the VEX one where AVX-VNNI is missing: Intel
// Xeons from Cascade Lake on, which lack the AVX-512 kernel's VBMI and
// BITALG.
var hasEVNNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

// useVNNI makes the VNNI kernels of kind (kindVNNI, kindEVNNI)
// DotQ1_0ActsBatch's, DotQ1_0ActsRows' and DotQ2_0ActsRows', on the
// AVX2 kernels' activation layouts. Their int32 block sums and float32
// steps are the AVX2 kernels', so the results are the same bits.
func useVNNI(kind batchKind) {
	if kind == kindEVNNI {
		dotQ1_0ActsBatch = dotQ1_0ActsBatchEVNNI
		dotQ1_0ActsRows = dotQ1_0ActsRowsEVNNI
		dotQ2_0ActsRows = dotQ2_0ActsRowsEVNNI
		kernelSet = "avx2+avx512vnni"
		return
	}
	dotQ1_0ActsBatch = dotQ1_0ActsBatchVNNI
	dotQ1_0ActsRows = dotQ1_0ActsRowsVNNI
	dotQ2_0ActsRows = dotQ2_0ActsRowsVNNI
	kernelSet = "avx2+avxvnni"
}

func dotQ1_0ActsBatchVNNI(w []byte, acts []Acts, out []float32, stride, nb int) {
	dotQ1_0ActsBatchAsm(w, acts, out, stride, nb, kindVNNI)
}

func dotQ1_0ActsRowsVNNI(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotActsRowsAsm(w, rowBytes, rows, acts, out, stride, nb, kindVNNI)
}

func dotQ1_0ActsBatchEVNNI(w []byte, acts []Acts, out []float32, stride, nb int) {
	dotQ1_0ActsBatchAsm(w, acts, out, stride, nb, kindEVNNI)
}

func dotQ1_0ActsRowsEVNNI(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotActsRowsAsm(w, rowBytes, rows, acts, out, stride, nb, kindEVNNI)
}

// The kernels of dotvnni_amd64.s: q1VNNI* with the VEX VPDPBUSD,
// q1EVNNI* with the EVEX one.

//go:noescape
func q1VNNI4(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1VNNI3(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1VNNI2(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1VNNI1(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1VNNIRows4(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1VNNIRows3(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1VNNIRows2(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1VNNIRows1(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1EVNNI4(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1EVNNI3(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1EVNNI2(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1EVNNI1(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1EVNNIRows4(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1EVNNIRows3(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1EVNNIRows2(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1EVNNIRows1(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
