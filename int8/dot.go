package int8

import (
	"encoding/binary"
	"fmt"

	"github.com/qnnprep/qnnprep/internal/half"
)

// DotQ8_0 returns the dot product of a Q8_0 weight row w and a Q8_0
// activation row x (as made by QuantizeRowQ8_0) of n elements, n a
// multiple of 32. The order is that of llama.cpp's
// ggml_vec_dot_q8_0_q8_0_generic, with every operation rounded to float32
// (no fused multiply-add):
//
//	sum := float32(0)
//	for each block b, in order:
//		s := Σ w.q[j]·x.q[j]                (exact, int32)
//		sum += float32(s) · (w.d·x.d)        (the fp16 product is exact in float32)
//
// The assembly version computes exactly the same float32 operations, so
// the result depends only on (w, x, n). It panics if w or x is shorter
// than n/32 blocks.
func DotQ8_0(w, x []byte, n int) float32 {
	nb := checkDot("DotQ8_0", w, x, n)
	if nb == 0 {
		return 0
	}
	return dotQ8_0(w, x, nb)
}

func checkDot(name string, w, x []byte, n int) int {
	if n < 0 || n%BlockQ8_0 != 0 {
		panic(fmt.Sprintf("int8: %s: %d elements is not a multiple of %d", name, n, BlockQ8_0))
	}
	nb := n / BlockQ8_0
	if len(w) < nb*BlockBytesQ8_0 || len(x) < nb*BlockBytesQ8_0 {
		panic(fmt.Sprintf("int8: %s: %d elements need %d bytes, have w %d, x %d", name, n, nb*BlockBytesQ8_0, len(w), len(x)))
	}
	return nb
}

// DotQ8_0Sym is DotQ8_0 for an activation row x none of whose codes is
// −128 (SymmetricQ8_0 reports it; QuantizeRowQ8_0 makes codes in
// [−127, 127] from finite values): bit for bit the same result, from a
// faster kernel. With a −128 code in x the result is unspecified.
func DotQ8_0Sym(w, x []byte, n int) float32 {
	nb := checkDot("DotQ8_0Sym", w, x, n)
	if nb == 0 {
		return 0
	}
	return dotQ8_0Sym(w, x, nb)
}

// DotQ8_0SymRows sets out[r] = DotQ8_0Sym(w[r*rowBytes:], x, n) for
// every r < len(out): consecutive weight rows against one activation row,
// with the arguments checked once (in decoding a row is some hundreds of
// nanoseconds of work, and per-call checks were a few percent of it). It
// panics if the rows do not fit in w or are shorter than n elements.
func DotQ8_0SymRows(w []byte, rowBytes int, x []byte, n int, out []float32) {
	rows := len(out)
	if rows == 0 {
		return
	}
	if rowBytes < 0 || rowBytes*(rows-1) > len(w) {
		panic(fmt.Sprintf("int8: DotQ8_0SymRows: %d rows of %d bytes do not fit in %d", rows, rowBytes, len(w)))
	}
	nb := checkDot("DotQ8_0SymRows", w[rowBytes*(rows-1):], x, n)
	if rows > 1 && rowBytes < nb*BlockBytesQ8_0 {
		panic(fmt.Sprintf("int8: DotQ8_0SymRows: rows of %d bytes are shorter than %d elements", rowBytes, n))
	}
	if nb == 0 {
		clear(out)
		return
	}
	dotQ8_0SymRows(w, rowBytes, x, nb, out)
}

// dotQ8_0SymRows is the kernel chosen at init; the arguments are checked.
var dotQ8_0SymRows = func(w []byte, rowBytes int, x []byte, nb int, out []float32) {
	for r := range out {
		out[r] = dotQ8_0Sym(w[r*rowBytes:], x, nb)
	}
}

// rowsGo is dotQ8_0SymRows in Go: the twin of the row kernels.
func rowsGo(w []byte, rowBytes int, x []byte, nb int, out []float32) {
	for r := range out {
		out[r] = dotQ8_0Go(w[r*rowBytes:], x, nb)
	}
}

// SymmetricQ8_0 reports whether no code of the Q8_0 row x (whole blocks)
// is −128, so that DotQ8_0Sym may take it.
func SymmetricQ8_0(x []byte) bool {
	for b := 0; b+BlockBytesQ8_0 <= len(x); b += BlockBytesQ8_0 {
		for _, c := range x[b+2 : b+BlockBytesQ8_0] {
			if c == 0x80 {
				return false
			}
		}
	}
	return true
}

// dotQ8_0Sym is the kernel chosen at init for DotQ8_0Sym.
var dotQ8_0Sym = dotQ8_0Go

// dotQ8_0 is the kernel chosen at init; the arguments are checked.
var dotQ8_0 = dotQ8_0Go

func f16At(b []byte) float32 { return half.F16ToF32(binary.LittleEndian.Uint16(b)) }

func dotQ8_0Go(w, x []byte, nb int) float32 { return dotQ8_0GoFrom(0, w, x, nb) }

// dotQ8_0GoFrom is dotQ8_0Go with the serial sum starting from sum.
func dotQ8_0GoFrom(sum float32, w, x []byte, nb int) float32 {
	for b := range nb {
		wb := w[b*BlockBytesQ8_0 : (b+1)*BlockBytesQ8_0]
		xb := x[b*BlockBytesQ8_0 : (b+1)*BlockBytesQ8_0]
		var s int32
		for j := 2; j < BlockBytesQ8_0; j++ {
			s += int32(int8(wb[j])) * int32(int8(xb[j]))
		}
		d := f16At(wb) * f16At(xb)
		sum += float32(float32(s) * d)
	}
	return sum
}
