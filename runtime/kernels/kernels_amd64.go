//go:build !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C {
		dotF32 = dotF32AVX2
		dotF16 = dotF16AVX2
		dotF16F32 = dotF16F32AVX2
		dotF16F32x2 = dotF16F32x2AVX2
		dotBF16 = dotBF16AVX2
		axpy = axpyAVX2
		scale = scaleAVX2
		kernelSet = "avx2"
		if hasAVX512 {
			dotF16F32 = dotF16F32AVX512
			dotF16F32x2 = dotF16F32x2AVX512
			dotF16F32Rows = dotF16F32RowsAVX512
			kernelSet = "avx512"
		}
	}
}

// hasAVX512 selects the zmm kernels: AVX-512 F for the arithmetic, BW and VL
// as the x86-64-v4 level the kernels are written for.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL

// The assembly dot products take n8 = n &^ 7 elements in place and the
// last n%8 (if any) copied into zero-padded 8-element arrays: a padded
// product is +0, which leaves a partial sum unchanged, since a sum that
// starts at +0 can never be −0.

func dotF32AVX2(a, b []float32) float32 {
	n := len(a)
	n8 := n &^ 7
	var ta, tb [8]float32
	var pa, pb unsafe.Pointer
	if n8 < n {
		copy(ta[:], a[n8:])
		copy(tb[:], b[n8:n])
		pa, pb = unsafe.Pointer(&ta), unsafe.Pointer(&tb)
	}
	return dotF32Asm(unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), n8, pa, pb)
}

func dotF16AVX2(w, x []uint16) float32 {
	n := len(x)
	n8 := n &^ 7
	var tw, tx [8]uint16
	var pw, px unsafe.Pointer
	if n8 < n {
		copy(tw[:], w[n8:n])
		copy(tx[:], x[n8:])
		pw, px = unsafe.Pointer(&tw), unsafe.Pointer(&tx)
	}
	return dotF16Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), n8, pw, px)
}

func dotF16F32AVX2(w []uint16, x []float32) float32 {
	n := len(x)
	n8 := n &^ 7
	var tw [8]uint16
	var tx [8]float32
	var pw, px unsafe.Pointer
	if n8 < n {
		copy(tw[:], w[n8:n])
		copy(tx[:], x[n8:])
		pw, px = unsafe.Pointer(&tw), unsafe.Pointer(&tx)
	}
	return dotF16F32Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), n8, pw, px)
}

func dotF16F32x2AVX2(w []uint16, x0, x1 []float32) (float32, float32) {
	if len(x0)%32 != 0 {
		return dotF16F32AVX2(w, x0), dotF16F32AVX2(w, x1)
	}
	var out [2]float32
	dotF16F32x2Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x0[0]), unsafe.Pointer(&x1[0]), len(x0), unsafe.Pointer(&out))
	return out[0], out[1]
}

func dotBF16AVX2(w, x []uint16) float32 {
	n := len(x)
	n8 := n &^ 7
	var tw, tx [8]uint16
	var pw, px unsafe.Pointer
	if n8 < n {
		copy(tw[:], w[n8:n])
		copy(tx[:], x[n8:])
		pw, px = unsafe.Pointer(&tw), unsafe.Pointer(&tx)
	}
	return dotBF16Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), n8, pw, px)
}

func axpyAVX2(a float32, x, y []float32) {
	axpyAsm(a, unsafe.Pointer(&x[0]), unsafe.Pointer(&y[0]), len(x))
}

func scaleAVX2(a float32, x []float32) {
	scaleAsm(a, unsafe.Pointer(&x[0]), len(x))
}

//go:noescape
func dotF32Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32

//go:noescape
func dotF16Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32

//go:noescape
func dotF16F32Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32

//go:noescape
func dotF16F32x2Asm(a, b0, b1 unsafe.Pointer, n32 int, out unsafe.Pointer)

//go:noescape
func dotBF16Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32

//go:noescape
func axpyAsm(a float32, x, y unsafe.Pointer, n int)

//go:noescape
func scaleAsm(a float32, x unsafe.Pointer, n int)

func dotF16F32AVX512(w []uint16, x []float32) float32 {
	n := len(x)
	n8 := n &^ 7
	var tw [8]uint16
	var tx [8]float32
	var pw, px unsafe.Pointer
	if n8 < n {
		copy(tw[:], w[n8:n])
		copy(tx[:], x[n8:])
		pw, px = unsafe.Pointer(&tw), unsafe.Pointer(&tx)
	}
	return dotF16F32Asm512(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), n8, pw, px)
}

func dotF16F32x2AVX512(w []uint16, x0, x1 []float32) (float32, float32) {
	if len(x0)%32 != 0 {
		return dotF16F32AVX512(w, x0), dotF16F32AVX512(w, x1)
	}
	var out [2]float32
	dotF16F32x2Asm512(unsafe.Pointer(&w[0]), unsafe.Pointer(&x0[0]), unsafe.Pointer(&x1[0]), len(x0), unsafe.Pointer(&out))
	return out[0], out[1]
}

// dotF16F32RowsAVX512 takes rows of whole groups of 32 in one call; other
// lengths go one row at a time.
func dotF16F32RowsAVX512(w []byte, rowBytes int, x, out []float32) {
	n := len(x)
	if n%32 != 0 {
		dotF16F32RowsEach(w, rowBytes, x, out)
		return
	}
	dotF16F32RowsAsm512(unsafe.Pointer(&w[0]), rowBytes, len(out), unsafe.Pointer(&x[0]), n, unsafe.Pointer(&out[0]))
}

//go:noescape
func dotF16F32Asm512(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32

//go:noescape
func dotF16F32x2Asm512(a, b0, b1 unsafe.Pointer, n32 int, out unsafe.Pointer)

//go:noescape
func dotF16F32RowsAsm512(w unsafe.Pointer, rowBytes, rows int, x unsafe.Pointer, n32 int, out unsafe.Pointer)
