// Package half converts between float32 and the two 16-bit float formats
// that model files use: IEEE 754 binary16 (F16) and bfloat16 (BF16).
//
// Rounding matches ggml: F16 and BF16 both round to nearest, ties to even,
// so a value quantized here has the same bits ggml would store.
package half

import (
	"math"

	"github.com/x448/float16"
)

// f16Table maps every binary16 bit pattern to its exact float32 value.
// A 256 KiB table is faster than bit manipulation in the hot kernels.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return &t
}()

// F16ToF32 returns the exact float32 value of the binary16 bits h.
func F16ToF32(h uint16) float32 { return f16Table[h] }

// F32ToF16 rounds f to the nearest binary16, ties to even.
func F32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// BF16ToF32 returns the exact float32 value of the bfloat16 bits b.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds f to the nearest bfloat16, ties to even, as ggml's
// GGML_FP32_TO_BF16 does; NaNs stay quiet NaNs.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + ((u >> 16) & 1))) >> 16)
}

// F16SliceToF32 converts little-endian binary16 bytes to float32.
// len(src) must be 2*len(dst).
func F16SliceToF32(dst []float32, src []byte) {
	if len(dst) == 0 {
		return
	}
	_ = src[2*len(dst)-1]
	f16Slice(dst, src)
}

// BF16SliceToF32 converts little-endian bfloat16 bytes to float32.
// len(src) must be 2*len(dst).
func BF16SliceToF32(dst []float32, src []byte) {
	if len(dst) == 0 {
		return
	}
	_ = src[2*len(dst)-1]
	bf16Slice(dst, src)
}

// The slice converters chosen at init (AVX2/F16C assembly on amd64; the
// build tag purego keeps the Go loops). Both give the same bits.
var (
	f16Slice  = f16SliceGo
	bf16Slice = bf16SliceGo
)

func f16SliceGo(dst []float32, src []byte) {
	_ = src[:2*len(dst)]
	for i := range dst {
		dst[i] = f16Table[uint16(src[2*i])|uint16(src[2*i+1])<<8]
	}
}

func bf16SliceGo(dst []float32, src []byte) {
	_ = src[:2*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(src[2*i])<<16 | uint32(src[2*i+1])<<24)
	}
}
