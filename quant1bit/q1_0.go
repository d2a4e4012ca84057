// Package quant1bit encodes weights to ggml's low-bit block types Q1_0
// (1 bit, 1.125 bpw) and Q2_0 (2.25 bpw), and computes their dot products
// with Q8_0 activations the way llama.cpp's CPU backend does.
//
// Decoding lives in gguf.Dequantize; this package only produces blocks
// and consumes them in the dot kernels. On amd64 with AVX2 and F16C the
// kernels are assembly, bit-identical to the Go versions; the build tag
// purego selects the Go versions everywhere.
package quant1bit

import (
	"encoding/binary"
	"fmt"
	"github.com/qnnprep/qnnprep/internal/half"
	"math"
)

// Block geometry of the two formats (ggml-common.h).
const (
	BlockQ1_0      = 128 // elements per Q1_0 block
	BlockBytesQ1_0 = 18  // fp16 d, then 16 bytes of sign bits
	BlockQ2_0      = 64  // elements per Q2_0 block
	BlockBytesQ2_0 = 18  // fp16 d, then 16 bytes of 2-bit codes
)

// rowBytes checks that src holds whole blocks and dst fits them.
func rowBytes(name string, n, block, blockBytes, dstLen int) int {
	if n%block != 0 {
		panic(fmt.Sprintf("quant1bit: %s: row of %d elements is not a multiple of %d", name, n, block))
	}
	rb := n / block * blockBytes
	if dstLen < rb {
		panic(fmt.Sprintf("quant1bit: %s: dst has %d bytes, want %d", name, dstLen, rb))
	}
	return rb
}

// QuantizeRowQ1_0 encodes src as Q1_0 blocks into dst, byte for byte as
// ggml's quantize_row_q1_0_ref: d = Σ|x|/128 accumulated in float32 in
// element order and rounded to fp16; element j of a block is bit j%8 of
// byte j/8, set when x >= 0 (so +0, -0 decode as +d and NaN as -d).
// len(src) must be a multiple of 128 and dst must hold len(src)/128*18 bytes.
func QuantizeRowQ1_0(src []float32, dst []byte) {
	rowBytes("QuantizeRowQ1_0", len(src), BlockQ1_0, BlockBytesQ1_0, len(dst))
	nb := len(src) / BlockQ1_0
	// Each block's Σ|x| is one float32 chain in element order (that is
	// ggml's rounding); eight (q1Sums8) or four blocks at a time keep
	// several chains in flight.
	b := 0
	// q1Sums8 is a function variable, so s escapes: one per row, not one
	// per eight blocks.
	var s [8]float32
	for ; b+8 <= nb; b += 8 {
		q1Sums8((*[8 * BlockQ1_0]float32)(src[b*BlockQ1_0:]), &s)
		for k, v := range s {
			binary.LittleEndian.PutUint16(dst[(b+k)*BlockBytesQ1_0:], half.F32ToF16(v/BlockQ1_0))
		}
	}
	for ; b+4 <= nb; b += 4 {
		x0 := (*[BlockQ1_0]float32)(src[b*BlockQ1_0:])
		x1 := (*[BlockQ1_0]float32)(src[(b+1)*BlockQ1_0:])
		x2 := (*[BlockQ1_0]float32)(src[(b+2)*BlockQ1_0:])
		x3 := (*[BlockQ1_0]float32)(src[(b+3)*BlockQ1_0:])
		var s0, s1, s2, s3 float32
		for j := range BlockQ1_0 {
			s0 += abs32(x0[j])
			s1 += abs32(x1[j])
			s2 += abs32(x2[j])
			s3 += abs32(x3[j])
		}
		binary.LittleEndian.PutUint16(dst[b*BlockBytesQ1_0:], half.F32ToF16(s0/BlockQ1_0))
		binary.LittleEndian.PutUint16(dst[(b+1)*BlockBytesQ1_0:], half.F32ToF16(s1/BlockQ1_0))
		binary.LittleEndian.PutUint16(dst[(b+2)*BlockBytesQ1_0:], half.F32ToF16(s2/BlockQ1_0))
		binary.LittleEndian.PutUint16(dst[(b+3)*BlockBytesQ1_0:], half.F32ToF16(s3/BlockQ1_0))
	}
	for ; b < nb; b++ {
		x := (*[BlockQ1_0]float32)(src[b*BlockQ1_0:])
		var sum float32
		for _, v := range x {
			sum += abs32(v)
		}
		binary.LittleEndian.PutUint16(dst[b*BlockBytesQ1_0:], half.F32ToF16(sum/BlockQ1_0))
	}
	if nb > 0 {
		q1Signs(src, dst, nb)
	}
}

// q1Sums8 writes Σ|x| of 8 consecutive blocks, each summed in element
// order in float32 (AVX2 on amd64, the same bits).
var q1Sums8 = q1Sums8Go

func q1Sums8Go(x *[8 * BlockQ1_0]float32, s *[8]float32) {
	for k := range 8 {
		var sum float32
		for _, v := range x[k*BlockQ1_0 : (k+1)*BlockQ1_0] {
			sum += abs32(v)
		}
		s[k] = sum
	}
}

// q1Signs writes the sign bytes of nb blocks (AVX2 on amd64).
var q1Signs = q1SignsGo

func q1SignsGo(src []float32, dst []byte, nb int) {
	for b := range nb {
		x := src[b*BlockQ1_0 : (b+1)*BlockQ1_0]
		y := dst[b*BlockBytesQ1_0 : (b+1)*BlockBytesQ1_0]
		for i := range BlockQ1_0 / 8 {
			var bits byte
			for j, v := range x[8*i : 8*i+8] {
				if v >= 0 {
					bits |= 1 << j
				}
			}
			y[2+i] = bits
		}
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// roundAway is C's roundf (halfway cases away from zero) for |f| < 2⁶²,
// much faster than math.Round: f ± 0.5 is exact in float64 whenever it
// matters (|f| ≥ 0.5), and the conversion truncates.
func roundAway(f float32) int64 {
	return int64(float64(f) + math.Copysign(0.5, float64(f)))
}
