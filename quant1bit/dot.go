package quant1bit

import (
	"encoding/binary"
	"fmt"

	"github.com/qnnprep/qnnprep/internal/half"
)

// Activations are Q8_0 blocks (fp16 d, 32 int8 codes), as made by
// int8.QuantizeRowQ8_0.
const (
	blockQ8_0      = 32
	blockBytesQ8_0 = 34
)

// DotQ1_0 returns the dot product of a Q1_0 weight row w and a Q8_0
// activation row x of n elements, n a multiple of 128. Each Q1_0 block
// pairs with four activation blocks (as in llama.cpp's CPU backend). The
// summation order is fixed, with every operation rounded to float32 (no
// fused multiply-add):
//
//	l[0..7] := +0
//	for each activation block i, in order (Q1_0 block b = i/4):
//		s := Σ ±x.q[j] over block i                  (exact, int32)
//		l[i%8] += float32(s) · (w[b].d · x[i].d)     (the fp16 product is exact)
//	result := ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7))
//
// Eight lanes over whole activation blocks are what the AVX2 kernel
// accumulates without a horizontal reduction per block; it computes
// exactly these float32 operations, so the result depends only on
// (w, x, n). It panics if w or x is too short.
func DotQ1_0(w, x []byte, n int) float32 {
	nb := checkDot("DotQ1_0", w, x, n, BlockQ1_0, BlockBytesQ1_0)
	if nb == 0 {
		return 0
	}
	return dotQ1_0(w, x, nb)
}

// DotQ2_0 returns the dot product of a Q2_0 weight row w and a Q8_0
// activation row x of n elements, n a multiple of 64. Each Q2_0 block
// pairs with two activation blocks; codes q count as q−1. The summation
// order is DotQ1_0's:
//
//	l[0..7] := +0
//	for each activation block i, in order (Q2_0 block b = i/2):
//		s := Σ (q[j]−1)·x.q[j] over block i           (exact, int32)
//		l[i%8] += float32(s) · (w[b].d · x[i].d)
//	result := ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7))
func DotQ2_0(w, x []byte, n int) float32 {
	nb := checkDot("DotQ2_0", w, x, n, BlockQ2_0, BlockBytesQ2_0)
	if nb == 0 {
		return 0
	}
	return dotQ2_0(w, x, nb)
}

func checkDot(name string, w, x []byte, n, block, blockBytes int) int {
	if n < 0 || n%block != 0 {
		panic(fmt.Sprintf("quant1bit: %s: %d elements is not a multiple of %d", name, n, block))
	}
	nb := n / block
	if len(w) < nb*blockBytes || len(x) < n/blockQ8_0*blockBytesQ8_0 {
		panic(fmt.Sprintf("quant1bit: %s: %d elements need w %d bytes and x %d bytes, have %d and %d",
			name, n, nb*blockBytes, n/blockQ8_0*blockBytesQ8_0, len(w), len(x)))
	}
	return nb
}

// The kernels chosen at init; arguments are checked, nb ≥ 1 blocks.
var (
	dotQ1_0 = dotQ1_0Go
	dotQ2_0 = dotQ2_0Go
)

func f16At(b []byte) float32 { return half.F16ToF32(binary.LittleEndian.Uint16(b)) }

// dotBlocks is the Go kernels' loop, the order DotQ1_0 documents: each
// weight block of blockBytes bytes pairs with per activation blocks, and
// sum gives activation block k's exact integer sum against weight block
// wb (k = 0..per−1).
func dotBlocks(w, x []byte, nb, blockBytes, per int, sum func(wb []byte, k int, xq []byte) int32) float32 {
	var l [8]float32
	for b := range nb {
		wb := w[b*blockBytes : (b+1)*blockBytes]
		d0 := f16At(wb)
		for k := range per {
			i := per*b + k
			xb := x[i*blockBytesQ8_0 : (i+1)*blockBytesQ8_0]
			l[i%8] += float32(float32(sum(wb, k, xb[2:])) * (d0 * f16At(xb)))
		}
	}
	return sum8(&l)
}

func dotQ1_0Go(w, x []byte, nb int) float32 {
	return dotBlocks(w, x, nb, BlockBytesQ1_0, 4, func(wb []byte, k int, xq []byte) int32 {
		bits := wb[2+4*k : 6+4*k]
		// Σ ±q = 2·Σ_{bit set} q − Σ q
		var set, all int32
		for j, v := range xq {
			q := int32(int8(v))
			all += q
			set += q & -int32(bits[j/8]>>(j%8)&1)
		}
		return 2*set - all
	})
}

// sum8 combines eight partial sums in the order the AVX2 kernels use.
func sum8(l *[8]float32) float32 {
	r0, r1, r2, r3 := l[0]+l[4], l[1]+l[5], l[2]+l[6], l[3]+l[7]
	return (r0 + r2) + (r1 + r3)
}

func dotQ2_0Go(w, x []byte, nb int) float32 {
	return dotBlocks(w, x, nb, BlockBytesQ2_0, 2, func(wb []byte, k int, xq []byte) int32 {
		codes := wb[2+8*k : 10+8*k]
		var s int32
		for j, v := range xq {
			s += (int32(codes[j/4]>>(2*(j%4))&3) - 1) * int32(int8(v))
		}
		return s
	})
}
