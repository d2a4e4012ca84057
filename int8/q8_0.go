// Package int8 encodes weights and activations as symmetric 8-bit
// integers stored in ggml's Q8_0 layout (32 int8 codes after an fp16
// scale), either one scale per block of 32 (ordinary Q8_0) or one scale
// per row repeated in every block, which is at once a valid Q8_0 tensor
// and the per-channel INT8 encoding QNN uses. DotQ8_0 is the dot product
// llama.cpp's CPU backend computes for Q8_0 weights.
//
// Decoding lives in gguf.Dequantize. On amd64 with AVX2 and F16C the dot
// kernel and QuantizeRowQ8_0 are assembly, bit-identical to the Go
// versions; the build tag purego selects the Go versions everywhere.
package int8

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/qnnprep/qnnprep/internal/half"
)

// Block geometry of Q8_0 (ggml-common.h).
const (
	BlockQ8_0      = 32 // elements per block
	BlockBytesQ8_0 = 34 // fp16 d, then 32 int8 codes
)

func rowBytes(name string, n, dstLen int) int {
	if n%BlockQ8_0 != 0 {
		panic(fmt.Sprintf("int8: %s: row of %d elements is not a multiple of %d", name, n, BlockQ8_0))
	}
	rb := n / BlockQ8_0 * BlockBytesQ8_0
	if dstLen < rb {
		panic(fmt.Sprintf("int8: %s: dst has %d bytes, want %d", name, dstLen, rb))
	}
	return rb
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// absMax is max|x| computed as ggml's MAX(a, fabsf(v)) loop does.
func absMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		if a := abs32(v); !(m > a) {
			m = a
		}
	}
	return m
}

// roundAway is C's roundf (halfway cases away from zero) for |f| < 2⁶²,
// much faster than math.Round: f ± 0.5 is exact in float64 whenever it
// matters (|f| ≥ 0.5), and the conversion truncates.
func roundAway(f float32) int64 {
	return int64(float64(f) + math.Copysign(0.5, float64(f)))
}

// QuantizeRowQ8_0 encodes src as Q8_0 blocks into dst, byte for byte as
// ggml's quantize_row_q8_0_ref: per block d = max|x|/127 in float32,
// codes roundf(x·(1/d)) (half away from zero) computed with that float32
// d, and d stored as fp16. An all-zero block gets d = 0 and zero codes.
// This is also how llama.cpp's CPU backend rounds activations before a
// dot product with Q8_0, Q1_0 or Q2_0 weights.
// len(src) must be a multiple of 32 and dst must hold len(src)/32*34 bytes.
func QuantizeRowQ8_0(src []float32, dst []byte) {
	rowBytes("QuantizeRowQ8_0", len(src), len(dst))
	if len(src) > 0 {
		quantizeQ8_0(src, dst)
	}
}

// quantizeQ8_0 is the encoder chosen at init; the arguments are checked.
var quantizeQ8_0 = quantizeQ8_0Go

func quantizeQ8_0Go(src []float32, dst []byte) {
	for b := 0; b*BlockQ8_0 < len(src); b++ {
		quantizeBlockQ8_0((*[BlockQ8_0]float32)(src[b*BlockQ8_0:]), (*[BlockBytesQ8_0]byte)(dst[b*BlockBytesQ8_0:]))
	}
}

func quantizeBlockQ8_0(x *[BlockQ8_0]float32, y *[BlockBytesQ8_0]byte) {
	d := absMax(x[:]) / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(y[:], half.F32ToF16(d))
	for j, v := range x {
		y[2+j] = byte(roundAway(v * id))
	}
}

// QuantizeRowPerChannel encodes src with one symmetric scale for the
// whole row and returns that scale. The scale max|x|/127 is rounded to
// fp16 first and the codes are round(x/d) (half away from zero) with that
// fp16 d, clamped to ±127, so decoding the bytes gives exactly code·d both
// in ggml (every Q8_0 block carries the same d) and in QNN's per-channel
// INT8 encoding with scale d and offset 0. An all-zero row gets d = 0 and
// zero codes; a scale beyond the fp16 range is stored as 65504. len(src) must be a multiple of 32 and dst must hold
// len(src)/32*34 bytes.
func QuantizeRowPerChannel(src []float32, dst []byte) float32 {
	rowBytes("QuantizeRowPerChannel", len(src), len(dst))
	h := half.F32ToF16(absMax(src) / 127)
	if h == 0x7c00 { // beyond fp16: saturate rather than store Inf
		h = 0x7bff
	}
	d := half.F16ToF32(h)
	for b := 0; b*BlockQ8_0 < len(src); b++ {
		x := src[b*BlockQ8_0 : (b+1)*BlockQ8_0]
		y := dst[b*BlockBytesQ8_0 : (b+1)*BlockBytesQ8_0]
		binary.LittleEndian.PutUint16(y, h)
		for j, v := range x {
			var q int64
			if d != 0 {
				q = min(max(roundAway(v/d), -127), 127)
			}
			y[2+j] = byte(q)
		}
	}
	return d
}
