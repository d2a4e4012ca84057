//go:build !purego

package kernels

import "unsafe"

// multiAsm is the signature of the multi-token decoding row kernels
// (multi_amd64.s).
type multiAsm = func(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)

func dotF16F32RowsMultiAVX2(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
	multiCall(dotF16F32Rows4x2Asm, dotF16F32Rows4x3Asm, dotF16F32Rows, w, rowBytes, rows, x, n, out, ldo)
}

func dotF16F32RowsMultiAVX512(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
	multiCall(dotF16F32Rows4x2Asm512, dotF16F32Rows4x3Asm512, dotF16F32Rows, w, rowBytes, rows, x, n, out, ldo)
}

func dotBF16F32RowsMultiAVX2(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
	multiCall(dotBF16F32Rows4x2Asm, dotBF16F32Rows4x3Asm, dotBF16F32Rows, w, rowBytes, rows, x, n, out, ldo)
}

func dotBF16F32RowsMultiAVX512(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
	multiCall(dotBF16F32Rows4x2Asm512, dotBF16F32Rows4x3Asm512, dotBF16F32Rows, w, rowBytes, rows, x, n, out, ldo)
}

// multiCall runs a multi-token kernel (two or three tokens) on the
// quarters of the rows (row i with rows i+q, i+2q, i+3q, q = rows/4),
// four memory streams as the decoding kernels read on the EPYC (on Intel
// too, where they read two: not measured there), and the decoding kernel
// one token by token on the last rows%4 (on all the rows when they are
// not whole groups of 32).
//
// On the EPYC (Zen 5), over the 700M F16 file's matrices
// (BenchmarkShortBatchF16File, one thread, CPU time, 11 interleaved
// rounds, load 4-8), against the decoding kernel per token over 256 KiB
// blocks of rows (the short batches before): 0.81x the time for three
// tokens, 0.79x for two with AVX-512 (three tokens cost 1.3 decoding
// passes instead of 1.6); 0.73x and 0.79x with AVX2.
func multiCall(two, three multiAsm, one rowsEachFunc, w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
	tokens := len(x) / n
	q := rows / 4
	if n%32 != 0 {
		q = 0
	}
	if q > 0 {
		asm := two
		if tokens == 3 {
			asm = three
		}
		asm(unsafe.Pointer(&w[0]), rowBytes, q, unsafe.Pointer(&x[0]), n, unsafe.Pointer(&out[0]), q*rowBytes, 4*q, 4*ldo)
	}
	if r := 4 * q; r < rows {
		for t := range tokens {
			one(w[r*rowBytes:], rowBytes, x[t*n:(t+1)*n], out[t*ldo+r:t*ldo+rows])
		}
	}
}

//go:noescape
func dotF16F32Rows4x2Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)

//go:noescape
func dotF16F32Rows4x3Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)

//go:noescape
func dotF16F32Rows4x2Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)

//go:noescape
func dotF16F32Rows4x3Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)

//go:noescape
func dotBF16F32Rows4x2Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)

//go:noescape
func dotBF16F32Rows4x3Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)

//go:noescape
func dotBF16F32Rows4x2Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)

//go:noescape
func dotBF16F32Rows4x3Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)
