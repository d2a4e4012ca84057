// Package kernels holds the runtime's float inner loops: dot products of a
// weight row stored as F32, F16 or BF16 with an activation vector, and the
// two vector updates attention needs.
//
// Every dot product uses one fixed summation order, implemented both in
// pure Go and (on amd64 with AVX2 and F16C, and FMA for the fused kernels)
// in assembly that performs exactly the same float32 operations, so a
// result depends only on the operands, never on the CPU, the thread count
// or the batch:
//
//   - 32 partial sums l[0..31] start at +0. Element i of the first
//     n32 = n &^ 31 elements adds its product to l[i%32]; each of the
//     remaining elements adds to l[i%8]. Elements are taken in increasing i.
//   - F32 and F16: each product is rounded to float32 before it is added
//     (no fused multiply-add). A binary16 weight times a binary16
//     activation is exact in float32 (11+11 significant bits), so the F16
//     kernels may fuse those: the one rounding is the add's, the same bits.
//   - BF16: each step is fused, l[j] = float32(w·x + l[j]) rounded once.
//     A bfloat16 product (8+8 significant bits) is exact in float32 unless
//     it underflows (|w·x| < 2⁻¹²⁶), so wherever the products are normal
//     numbers (real models) this is the unfused sum bit for bit; the
//     definition fixes the underflow cases, in which a fused kernel (the
//     F16 kernels with a bfloat16 widening) and an unfused one differ.
//   - The partial sums are combined as
//     r8[j] = (l[j]+l[j+8]) + (l[j+16]+l[j+24]), r4[j] = r8[j]+r8[j+4],
//     r2[j] = r4[j]+r4[j+2], result = r2[0]+r2[1].
//
// This is the order 4 AVX2 accumulators of 8 lanes produce naturally, and
// 2 AVX-512 accumulators of 16 lanes (l[0..15], l[16..31]) too: the
// AVX-512 kernels give the same bits as the AVX2 ones, so a model's logits
// do not depend on which set the CPU selects.
// Results that are NaN are NaN in both versions, possibly with different
// payloads. The build tag purego selects the Go versions everywhere.
//
// As in llama.cpp's CPU backend, activations meet F16 weights rounded to
// F16 and BF16 weights rounded to BF16 (see RoundF16, RoundBF16); DotF16
// and DotBF16 take them in that 16-bit form, the F32 forms (DotF16F32,
// DotBF16F32 and the Rows, RowsMulti and Mul kernels) as float32 values.
package kernels

import (
	"fmt"
	"math"

	"github.com/qnnprep/qnnprep/internal/half"
)

// Dot returns Σ a[i]·b[i] over i < len(a) in the package's summation
// order. It panics if len(b) < len(a).
func Dot(a, b []float32) float32 {
	if len(b) < len(a) {
		panic(fmt.Sprintf("kernels: Dot: len(b) = %d < len(a) = %d", len(b), len(a)))
	}
	if len(a) == 0 {
		return 0
	}
	return dotF32(a, b[:len(a)])
}

// DotF32 returns Σ w[i]·x[i] for a weight row w of len(x) little-endian
// float32 values, in the package's summation order. It panics if w is
// shorter than 4·len(x) bytes.
func DotF32(w []byte, x []float32) float32 {
	checkRow("DotF32", len(w), 4, len(x))
	if len(x) == 0 {
		return 0
	}
	return dotF32(f32View(w, len(x)), x)
}

// DotF16 returns Σ w[i]·x[i] for a weight row w of len(x) little-endian
// binary16 values and activations x already rounded to binary16 (bit
// patterns), in the package's summation order. Products and sums are
// float32. It panics if w is shorter than 2·len(x) bytes.
func DotF16(w []byte, x []uint16) float32 {
	checkRow("DotF16", len(w), 2, len(x))
	if len(x) == 0 {
		return 0
	}
	return dotF16(u16View(w, len(x)), x)
}

// DotF16F32 is DotF16 with the binary16 activations given as float32
// values (each exactly a binary16 value, as RoundF16F32 makes them): the
// same result bit for bit, with one conversion per element fewer.
func DotF16F32(w []byte, x []float32) float32 { return dot16F32("DotF16F32", dotF16F32, w, x) }

// dot16F32 runs dot on a checked row of 16-bit weights.
func dot16F32(name string, dot func(w []uint16, x []float32) float32, w []byte, x []float32) float32 {
	checkRow(name, len(w), 2, len(x))
	if len(x) == 0 {
		return 0
	}
	return dot(u16View(w, len(x)), x)
}

// DotF16F32Rows sets out[r] = DotF16F32(w[r·rowBytes:], x) for r <
// len(out), bit for bit: the rows of one decoding step in one call. It
// panics if the rows do not fit in w.
func DotF16F32Rows(w []byte, rowBytes int, x, out []float32) {
	checkedRows("DotF16F32Rows", dotF16F32Rows, w, rowBytes, x, out)
}

// checkedRows runs the rows kernel rows after checking that the rows of
// 16-bit weights fit in w.
func checkedRows(name string, rows func(w []byte, rowBytes int, x, out []float32), w []byte, rowBytes int, x, out []float32) {
	n := len(x)
	if len(out) == 0 {
		return
	}
	if rowBytes < 2*n || (len(out)-1)*rowBytes+2*n > len(w) {
		panic(fmt.Sprintf("kernels: %s: %d rows of %d elements at stride %d do not fit in %d bytes", name, len(out), n, rowBytes, len(w)))
	}
	if n == 0 {
		clear(out)
		return
	}
	rows(w, rowBytes, x, out)
}

// DotBF16 is DotF16 for bfloat16 weights and activations, each step fused
// (see the package comment).
func DotBF16(w []byte, x []uint16) float32 {
	checkRow("DotBF16", len(w), 2, len(x))
	if len(x) == 0 {
		return 0
	}
	return dotBF16(u16View(w, len(x)), x)
}

// DotBF16F32 is DotBF16 with the bfloat16 activations given as float32
// values (each exactly a bfloat16 value, as RoundBF16F32 makes them): the
// same result bit for bit.
func DotBF16F32(w []byte, x []float32) float32 { return dot16F32("DotBF16F32", dotBF16F32, w, x) }

// DotBF16F32Rows sets out[r] = DotBF16F32(w[r·rowBytes:], x) for r <
// len(out), bit for bit, as DotF16F32Rows does for binary16 weights.
func DotBF16F32Rows(w []byte, rowBytes int, x, out []float32) {
	checkedRows("DotBF16F32Rows", dotBF16F32Rows, w, rowBytes, x, out)
}

// Axpy sets y[i] += a·x[i] for i < len(x), the product rounded to
// float32 before the addition. It panics if len(y) < len(x).
func Axpy(a float32, x, y []float32) {
	if len(y) < len(x) {
		panic(fmt.Sprintf("kernels: Axpy: len(y) = %d < len(x) = %d", len(y), len(x)))
	}
	if len(x) == 0 {
		return
	}
	axpy(a, x, y[:len(x)])
}

// Scale sets x[i] *= a.
func Scale(a float32, x []float32) {
	if len(x) == 0 {
		return
	}
	scale(a, x)
}

// RoundF16 stores src rounded to binary16 (nearest, ties to even, as
// llama.cpp rounds activations for F16 weights) in dst. len(dst) must be
// at least len(src).
func RoundF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = half.F32ToF16(v)
	}
}

// RoundF16F32 stores src rounded to binary16 as RoundF16 does, as
// float32 values, in dst: the activations DotF16F32 takes.
func RoundF16F32(dst, src []float32) {
	// f16(1·v) = f16(v): the product with 1 is exact, and decoding then
	// rounds each token's activations with the vector conversions.
	scaleF16(1, src, dst[:len(src)])
}

// RoundBF16 stores src rounded to bfloat16 (nearest, ties to even) in dst.
func RoundBF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = half.F32ToBF16(v)
	}
}

// RoundBF16F32 stores src rounded to bfloat16 as RoundBF16 does, as
// float32 values, in dst: the activations DotBF16F32 takes.
func RoundBF16F32(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = bf16(half.F32ToBF16(v))
	}
}

func checkRow(name string, have, size, n int) {
	if have < size*n {
		panic(fmt.Sprintf("kernels: %s: weight row has %d bytes, want %d for %d elements", name, have, size*n, n))
	}
}

// The kernels chosen at init; slices are non-empty and of equal length.
var (
	dotF32     = dotF32Go
	dotF16     = dotF16Go
	dotBF16    = dotBF16Go[uint16]
	dotBF16F32 = dotBF16Go[float32]
	axpy       = axpyGo
	scale      = scaleGo
)

// lanes are the 32 partial sums of the summation order.
type lanes [32]float32

func (l *lanes) sum() float32 {
	var r8 [8]float32
	for j := range 8 {
		r8[j] = (l[j] + l[j+8]) + (l[j+16] + l[j+24])
	}
	var r4 [4]float32
	for j := range 4 {
		r4[j] = r8[j] + r8[j+4]
	}
	return (r4[0] + r4[2]) + (r4[1] + r4[3])
}

// The dot twins below each write the order's loop themselves: one loop
// taking the rounded products 32 at a time from a function (the twins
// differing only in how they widen) measured 1.55-2.1x the CPU time per
// dot with -tags purego on amd64 (BenchmarkDot*/go), where these loops
// are the kernels.
func dotF32Go(a, b []float32) float32 {
	var l lanes
	n := len(a)
	b = b[:n]
	i := 0
	for ; i+32 <= n; i += 32 {
		for j := range 32 {
			l[j] += float32(a[i+j] * b[i+j])
		}
	}
	for ; i < n; i++ {
		l[i%8] += float32(a[i] * b[i])
	}
	return l.sum()
}

var dotF16F32 = dotF16F32Go

var (
	dotF16F32Rows  = dotF16F32RowsEach
	dotBF16F32Rows = dotBF16F32RowsEach
)

// dotF16F32RowsEach and dotBF16F32RowsEach take the rows one DotF16F32 or
// DotBF16F32 at a time.
func dotF16F32RowsEach(w []byte, rowBytes int, x, out []float32) {
	rowsEach(dotF16F32, w, rowBytes, x, out)
}

func dotBF16F32RowsEach(w []byte, rowBytes int, x, out []float32) {
	rowsEach(dotBF16F32, w, rowBytes, x, out)
}

func rowsEach(dot func(w []uint16, x []float32) float32, w []byte, rowBytes int, x, out []float32) {
	n := len(x)
	for r := range out {
		out[r] = dot(u16View(w[r*rowBytes:], n), x)
	}
}

func dotF16F32Go(w []uint16, x []float32) float32 {
	var l lanes
	n := len(x)
	w = w[:n]
	i := 0
	for ; i+32 <= n; i += 32 {
		for j := range 32 {
			l[j] += float32(half.F16ToF32(w[i+j]) * x[i+j])
		}
	}
	for ; i < n; i++ {
		l[i%8] += float32(half.F16ToF32(w[i]) * x[i])
	}
	return l.sum()
}

func dotF16Go(w, x []uint16) float32 {
	var l lanes
	n := len(x)
	w = w[:n]
	i := 0
	for ; i+32 <= n; i += 32 {
		for j := range 32 {
			l[j] += float32(half.F16ToF32(w[i+j]) * half.F16ToF32(x[i+j]))
		}
	}
	for ; i < n; i++ {
		l[i%8] += float32(half.F16ToF32(w[i]) * half.F16ToF32(x[i]))
	}
	return l.sum()
}

func bf16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// bf16Act widens a bfloat16 activation, given as its bits or as the
// float32 value.
func bf16Act[X uint16 | float32](v X) float32 {
	if h, ok := any(v).(uint16); ok {
		return bf16(h)
	}
	return float32(v)
}

// fma sets l[j] = w·x + l[j] rounded once to float32, the BF16 step.
// For bfloat16 operands the float64 multiply-add is that: w·x is exact in
// float64, and the float64 sum is inexact only when the terms' exponents
// are over 29 apart, the smaller then far below half a float32 ulp of the
// larger (a float32 value), so rounding to float64 first gives the same
// float32.
func (l *lanes) fma(j int, w, x float32) {
	l[j] = float32(math.FMA(float64(w), float64(x), float64(l[j])))
}

// dotBF16Go is the twin of DotBF16 (activations as bits) and DotBF16F32
// (as float32 values).
func dotBF16Go[X uint16 | float32](w []uint16, x []X) float32 {
	var l lanes
	n := len(x)
	w = w[:n]
	i := 0
	for ; i+32 <= n; i += 32 {
		for j := range 32 {
			l.fma(j, bf16(w[i+j]), bf16Act(x[i+j]))
		}
	}
	for ; i < n; i++ {
		l.fma(i%8, bf16(w[i]), bf16Act(x[i]))
	}
	return l.sum()
}

func axpyGo(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += float32(a * v)
	}
}

func scaleGo(a float32, x []float32) {
	for i := range x {
		x[i] *= a
	}
}
