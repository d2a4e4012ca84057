//go:build !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/qnnprep/qnnprep/internal/cpuvendor"
)

// init selects every kernel of the package this CPU runs; the Go
// versions stay where it lacks the features.
func init() {
	x := cpu.X86
	if x.HasAVX2 {
		expVec, siluMulVec = expAVX2, siluMulAVX2
		dotHeads, dotHeadsSlots = dotHeadsAVX2, dotHeadsSlotsAVX2
		axpySlots = axpySlotsAVX2
		if hasAVX512 {
			axpySlots = axpySlotsAVX512
		}
	}
	if x.HasAVX2 && x.HasF16C {
		dotF32 = dotF32AVX2
		dotF16 = dotF16AVX2
		dotF16F32 = dotF16F32AVX2
		axpy = axpyAVX2
		scale = scaleAVX2
		dotRows, axpyRows = dotRowsAVX2, axpyRowsAVX2
		dotRowsSlots = dotRowsSlotsAVX2
		kernelSet = "avx2"
		if hasAVX512 {
			dotF16F32 = dotF16F32AVX512
			kernelSet = "avx512"
		}
	}
	if x.HasAVX2 && x.HasF16C && x.HasFMA {
		madF16, scaleF16 = madF16AVX2, scaleF16AVX2
		flashF16 = flashF16AVX2
		if hasAVX512 {
			flashF16 = flashF16AVX512
		}
		// The F16 products fuse multiply and add (exact for binary16
		// operands, see the package comment).
		dotF16F32Rows, mulF16 = dotF16F32RowsAVX2, mulF16AVX2
		dotF16F32RowsMulti = dotF16F32RowsMultiAVX2
		// The BF16 steps are fused by definition: the F16 kernels with a
		// bfloat16 widening.
		dotBF16, dotBF16F32 = dotBF16AVX2, dotBF16F32AVX2
		dotBF16F32Rows, dotBF16F32RowsMulti = dotBF16F32RowsAVX2, dotBF16F32RowsMultiAVX2
		mulBF16 = mulBF16AVX2
		if hasAVX512 {
			dotF16F32Rows, mulF16 = dotF16F32RowsAVX512, mulF16AVX512
			dotF16F32RowsMulti = dotF16F32RowsMultiAVX512
			dotBF16F32Rows, dotBF16F32RowsMulti = dotBF16F32RowsAVX512, dotBF16F32RowsMultiAVX512
			mulBF16 = mulBF16AVX512
		}
	}
	prefetch = func(x []float32) { prefetchAsm(unsafe.Pointer(&x[0]), 4*len(x)) }
}

// hasAVX512 selects the zmm kernels: AVX-512 F for the arithmetic, BW and VL
// as the x86-64-v4 level the kernels are written for.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL

// tail holds the last n%8 elements of a dot product's operands, zero
// padded to 8, for the assembly dot products.
type tail[A, B uint16 | float32] struct {
	a [8]A
	b [8]B
}

// args returns the assembly dot products' arguments for a and b (equal
// lengths n): the operands, n8 = n &^ 7 elements taken in place, and the
// last n%8 copied into t (nil when there are none). A padded product is
// +0, which leaves a partial sum unchanged, since a sum that starts at +0
// can never be −0 unless the steps are fused (BF16, see bf16Tail).
func (t *tail[A, B]) args(a []A, b []B) (pa, pb unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) {
	n := len(a)
	n8 = n &^ 7
	if n8 < n {
		copy(t.a[:], a[n8:])
		copy(t.b[:], b[n8:n])
		ta, tb = unsafe.Pointer(&t.a), unsafe.Pointer(&t.b)
	}
	return unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), n8, ta, tb
}

func dotF32AVX2(a, b []float32) float32 { return dotF32Asm(new(tail[float32, float32]).args(a, b)) }
func dotF16AVX2(w, x []uint16) float32  { return dotF16Asm(new(tail[uint16, uint16]).args(w, x)) }

// bf16Tail returns a tail for the fused BF16 kernels, its padding weights
// −0: a fused sum can be −0 (products that underflow round to −0), which a
// +0 product would turn into +0, while a −0 product leaves every sum as
// it is.
func bf16Tail[B uint16 | float32]() *tail[uint16, B] {
	t := new(tail[uint16, B])
	for i := range t.a {
		t.a[i] = 0x8000
	}
	return t
}

func dotBF16AVX2(w, x []uint16) float32 { return dotBF16Asm(bf16Tail[uint16]().args(w, x)) }

func dotBF16F32AVX2(w []uint16, x []float32) float32 {
	return dotBF16F32Asm(bf16Tail[float32]().args(w, x))
}

func dotF16F32AVX2(w []uint16, x []float32) float32 {
	return dotF16F32Asm(new(tail[uint16, float32]).args(w, x))
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
func dotF16F32RowsAsm(w unsafe.Pointer, rowBytes, pairs int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)

//go:noescape
func dotBF16Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32

//go:noescape
func dotBF16F32Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32

//go:noescape
func axpyAsm(a float32, x, y unsafe.Pointer, n int)

//go:noescape
func scaleAsm(a float32, x unsafe.Pointer, n int)

func dotF16F32AVX512(w []uint16, x []float32) float32 {
	return dotF16F32Asm512(new(tail[uint16, float32]).args(w, x))
}

// rows4Streams selects the decoding row kernels that read four rows far
// apart at a time (the quarters of a call's rows) over those that read two
// (its halves): everywhere but on Intel. On the EPYC (Zen 5, 2 vCPUs,
// shared, load about 3) over the mapped 700M F16 file
// (BenchmarkDecodeF16File, -count 10, two processes pinned one per vCPU
// for two threads), four streams took 1/1.21 of the CPU time per pass of
// two with AVX-512 at one thread (quartiles 1.19-1.28x) and 1/1.19 at two
// (1.18-1.22x), with AVX2 1/1.21 (1.15-1.25x) and 1/1.21 (1.15-1.26x):
// 28.7 GB of weights per CPU second at one thread, 30.6 per thread at two
// (AVX-512). Those passes were -count blocks, one form after another; a
// review re-measured one thread in 10 interleaved rounds (one form per
// process, shuffled, pinned, load 4-5): four streams 1.157x two with
// AVX-512 (quartiles 1.14-1.17) and 1.157x with AVX2 (1.12-1.18). Tried
// and dropped there, interleaved in rounds, as speed
// against the two-stream 1 KiB kernels (median per-round ratio, one
// thread / two threads):
//
//	avx512, 2 streams, no prefetch        1.06 / 0.93
//	        2 streams, 256 B, 512 B, 2 KiB ahead: no faster than 1 KiB
//	        4 streams, no prefetch        1.15 / 1.10
//	        4 streams, 768 B / 1.5 KiB / 2 KiB ahead: 0.93 / 0.98 / 0.97 of 1 KiB
//	        4 streams, PREFETCHT1 / PREFETCHNTA 1 KiB: 0.87 / 0.99 of PREFETCHT0
//	        8 streams (no prefetch, 1 KiB, 2 KiB): 1.09, 0.95, 0.96 (one thread)
//	avx2,   2 streams, no prefetch        1.07 / 0.98
//	        4 streams, 1 KiB ahead        1.10-1.21 / 1.10-1.13 (2 KiB: 1.02-1.07 / 1.01-1.05 of that)
//
// Two streams on Intel: on the Xeon the kernels were tuned on, 1 KiB
// ahead beat the hardware prefetcher alone, and four streams gained
// nothing once prefetched (int8's decoding kernels).
var rows4Streams = !cpuvendor.Intel

// dotF16F32RowsAVX2 and dotF16F32RowsAVX512, and their BF16 forms, take
// rows of whole groups of 32 in one call, four or two streams
// (rows4Streams); other lengths go one row at a time.
func dotF16F32RowsAVX2(w []byte, rowBytes int, x, out []float32) {
	streamsCall(dotF16F32Rows4Asm, dotF16F32RowsAsm, dotF16F32RowsEach, w, rowBytes, x, out)
}

func dotF16F32RowsAVX512(w []byte, rowBytes int, x, out []float32) {
	streamsCall(dotF16F32Rows4Asm512, dotF16F32RowsAsm512, dotF16F32RowsEach, w, rowBytes, x, out)
}

func dotBF16F32RowsAVX2(w []byte, rowBytes int, x, out []float32) {
	streamsCall(dotBF16F32Rows4Asm, dotBF16F32RowsAsm, dotBF16F32RowsEach, w, rowBytes, x, out)
}

func dotBF16F32RowsAVX512(w []byte, rowBytes int, x, out []float32) {
	streamsCall(dotBF16F32Rows4Asm512, dotBF16F32RowsAsm512, dotBF16F32RowsEach, w, rowBytes, x, out)
}

// rowsEachFunc takes rows of any length one dot product at a time.
type rowsEachFunc = func(w []byte, rowBytes int, x, out []float32)

// streamsCall runs quadsCall or rowsCall, as rows4Streams selects.
func streamsCall(quad, pair rowsAsm, each rowsEachFunc, w []byte, rowBytes int, x, out []float32) {
	if rows4Streams {
		quadsCall(quad, pair, each, w, rowBytes, x, out)
		return
	}
	rowsCall(pair, each, w, rowBytes, x, out)
}

// rowsAsm is the signature of the decoding row kernels (ROWPAIRS,
// dotF16F32Rows4Asm512): groups of rows far apart, group i the rows
// i+k·far/rowBytes, results to out[i+k·farOut/4].
type rowsAsm = func(w unsafe.Pointer, rowBytes, groups int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)

// quadsCall runs a four-stream kernel on the quarters of the rows (row i
// with rows i+q, i+2q, i+3q, q = len(out)/4) and pairs, as rowsCall, on
// the last len(out)%4; rows that are not whole groups of 32 go to each.
func quadsCall(quad, pair rowsAsm, each rowsEachFunc, w []byte, rowBytes int, x, out []float32) {
	n := len(x)
	if n%32 != 0 {
		each(w, rowBytes, x, out)
		return
	}
	q := len(out) / 4
	if q > 0 {
		quad(unsafe.Pointer(&w[0]), rowBytes, q, unsafe.Pointer(&x[0]), n, unsafe.Pointer(&out[0]), q*rowBytes, 4*q)
	}
	if 4*q < len(out) {
		rowsCall(pair, each, w[4*q*rowBytes:], rowBytes, x, out[4*q:])
	}
}

// rowsCall runs a rows kernel on pairs of rows far apart: row i with row
// i+len(out)/2, and a last odd row with itself; rows that are not whole
// groups of 32 go to each.
func rowsCall(asm rowsAsm, each rowsEachFunc, w []byte, rowBytes int, x, out []float32) {
	n := len(x)
	if n%32 != 0 {
		each(w, rowBytes, x, out)
		return
	}
	half := len(out) / 2
	if half > 0 {
		asm(unsafe.Pointer(&w[0]), rowBytes, half, unsafe.Pointer(&x[0]), n, unsafe.Pointer(&out[0]), half*rowBytes, 4*half)
	}
	if r := len(out) - 1; r%2 == 0 {
		asm(unsafe.Pointer(&w[r*rowBytes]), rowBytes, 1, unsafe.Pointer(&x[0]), n, unsafe.Pointer(&out[r]), 0, 0)
	}
}

//go:noescape
func dotF16F32Asm512(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32

//go:noescape
func dotF16F32RowsAsm512(w unsafe.Pointer, rowBytes, pairs int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)

//go:noescape
func dotF16F32Rows4Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)

//go:noescape
func dotF16F32Rows4Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)

//go:noescape
func dotBF16F32RowsAsm(w unsafe.Pointer, rowBytes, pairs int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)

//go:noescape
func dotBF16F32Rows4Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)

//go:noescape
func dotBF16F32RowsAsm512(w unsafe.Pointer, rowBytes, pairs int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)

//go:noescape
func dotBF16F32Rows4Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)
