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

// useVNNI makes the AVX-VNNI kernels DotQ1_0ActsBatch's,
// DotQ1_0ActsRows' and DotQ2_0ActsRows', on the AVX2 kernels' activation
// layouts. Their int32 block sums and float32 steps are the AVX2
// kernels', so the results are the same bits.
func useVNNI() {
	dotQ1_0ActsBatch = dotQ1_0ActsBatchVNNI
	dotQ1_0ActsRows = dotQ1_0ActsRowsVNNI
	dotQ2_0ActsRows = dotQ2_0ActsRowsVNNI
	kernelSet = "avx2+avxvnni"
}

func dotQ1_0ActsBatchVNNI(w []byte, acts []Acts, out []float32, stride, nb int) {
	dotQ1_0ActsBatchAsm(w, acts, out, stride, nb, kindVNNI)
}

func dotQ1_0ActsRowsVNNI(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotQ1_0ActsRowsAsm(w, rowBytes, rows, acts, out, stride, nb, kindVNNI)
}

// The kernels of dotvnni_amd64.s.

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
