package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/qnnprep/qnnprep/internal/half"
)

// Dequantizers, bit-exact with ggml's type_traits[type].to_float
// (ggml-quants.c dequantize_row_*): the same float32 operations in the same
// order. Where ggml computes a*b - c, the product is converted to float32
// explicitly, because Go may otherwise fuse it into one FMA on some
// architectures and round differently.

type dequantFunc func(src []byte, dst []float32)

var dequantizers = [TypeCount]dequantFunc{
	F32:    deqF32,
	F16:    func(src []byte, dst []float32) { half.F16SliceToF32(dst, src) },
	BF16:   func(src []byte, dst []float32) { half.BF16SliceToF32(dst, src) },
	Q4_0:   deqQ4_0,
	Q4_1:   deqQ4_1,
	Q5_0:   deqQ5_0,
	Q5_1:   deqQ5_1,
	Q8_0:   deqQ8_0,
	Q2_K:   deqQ2_K,
	Q3_K:   deqQ3_K,
	Q4_K:   deqQ4_K,
	Q5_K:   deqQ5_K,
	Q6_K:   deqQ6_K,
	IQ4_NL: deqIQ4_NL,
	IQ4_XS: deqIQ4_XS,
	TQ1_0:  deqTQ1_0,
	TQ2_0:  deqTQ2_0,
	MXFP4:  deqMXFP4,
	NVFP4:  deqNVFP4,
	Q1_0:   deqQ1_0,
	Q2_0:   deqQ2_0,
}

// CanDequantize reports whether Dequantize supports type t.
func CanDequantize(t Type) bool { return t < TypeCount && dequantizers[t] != nil }

// Dequantize converts len(dst) values of type t from src to float32,
// exactly as ggml's to_float does. len(dst) must be a whole number of
// blocks and len(src) must equal t.RowBytes(len(dst)); src may hold several
// rows back to back.
func Dequantize(t Type, src []byte, dst []float32) error {
	if !CanDequantize(t) {
		return fmt.Errorf("gguf: cannot dequantize type %s", t)
	}
	want, err := t.RowBytes(int64(len(dst)))
	if err != nil {
		return fmt.Errorf("gguf: dequantize %s: %w", t, err)
	}
	if int64(len(src)) != want {
		return fmt.Errorf("gguf: dequantize %s: %d bytes for %d values, expected %d", t, len(src), len(dst), want)
	}
	if len(dst) > 0 {
		dequantizers[t](src, dst)
	}
	return nil
}

func f16(b []byte) float32 { return half.F16ToF32(binary.LittleEndian.Uint16(b)) }

func deqF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func deqQ4_0(src []byte, dst []float32) {
	for ; len(src) >= 18; src, dst = src[18:], dst[32:] {
		d := f16(src)
		qs := src[2:18]
		y := dst[:32]
		for j, q := range qs {
			y[j] = float32(int(q&0xF)-8) * d
			y[j+16] = float32(int(q>>4)-8) * d
		}
	}
}

func deqQ4_1(src []byte, dst []float32) {
	for ; len(src) >= 20; src, dst = src[20:], dst[32:] {
		d, m := f16(src), f16(src[2:])
		qs := src[4:20]
		y := dst[:32]
		for j, q := range qs {
			y[j] = float32(float32(q&0xF)*d) + m
			y[j+16] = float32(float32(q>>4)*d) + m
		}
	}
}

func deqQ5_0(src []byte, dst []float32) {
	for ; len(src) >= 22; src, dst = src[22:], dst[32:] {
		d := f16(src)
		qh := binary.LittleEndian.Uint32(src[2:])
		qs := src[6:22]
		y := dst[:32]
		for j, q := range qs {
			h0 := (qh >> j << 4) & 0x10
			h1 := (qh >> (j + 12)) & 0x10
			y[j] = float32(int32(uint32(q&0xF)|h0)-16) * d
			y[j+16] = float32(int32(uint32(q>>4)|h1)-16) * d
		}
	}
}

func deqQ5_1(src []byte, dst []float32) {
	for ; len(src) >= 24; src, dst = src[24:], dst[32:] {
		d, m := f16(src), f16(src[2:])
		qh := binary.LittleEndian.Uint32(src[4:])
		qs := src[8:24]
		y := dst[:32]
		for j, q := range qs {
			h0 := (qh >> j << 4) & 0x10
			h1 := (qh >> (j + 12)) & 0x10
			y[j] = float32(float32(uint32(q&0xF)|h0)*d) + m
			y[j+16] = float32(float32(uint32(q>>4)|h1)*d) + m
		}
	}
}

func deqQ8_0(src []byte, dst []float32) {
	for ; len(src) >= 34; src, dst = src[34:], dst[32:] {
		d := f16(src)
		qs := src[2:34]
		y := dst[:32]
		for j, q := range qs {
			y[j] = float32(int8(q)) * d
		}
	}
}

// Q2_K: 16 groups of 16 with a 4-bit scale and a 4-bit min each.
func deqQ2_K(src []byte, dst []float32) {
	for ; len(src) >= 84; src, dst = src[84:], dst[256:] {
		scales := src[0:16]
		q := src[16:80]
		d, dmin := f16(src[80:]), f16(src[82:])
		y := dst[:256]
		is := 0
		for n := 0; n < 256; n += 128 {
			for shift := uint(0); shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					sc := scales[is]
					is++
					dl := d * float32(sc&0xF)
					ml := dmin * float32(sc>>4)
					qq := q[16*half : 16*half+16]
					out := y[:16]
					for l, b := range qq {
						out[l] = float32(dl*float32((b>>shift)&3)) - ml
					}
					y = y[16:]
				}
			}
			q = q[32:]
		}
	}
}

// q3kScales unpacks Q3_K's sixteen 6-bit scales from 12 bytes.
func q3kScales(b []byte, out *[16]int8) {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	a0 := binary.LittleEndian.Uint32(b[0:])
	a1 := binary.LittleEndian.Uint32(b[4:])
	tmp := binary.LittleEndian.Uint32(b[8:])
	s := [4]uint32{
		(a0 & kmask2) | ((tmp >> 0 & kmask1) << 4),
		(a1 & kmask2) | ((tmp >> 2 & kmask1) << 4),
		((a0 >> 4) & kmask2) | ((tmp >> 4 & kmask1) << 4),
		((a1 >> 4) & kmask2) | ((tmp >> 6 & kmask1) << 4),
	}
	for i, v := range s {
		out[4*i+0] = int8(v)
		out[4*i+1] = int8(v >> 8)
		out[4*i+2] = int8(v >> 16)
		out[4*i+3] = int8(v >> 24)
	}
}

// Q3_K: 2 low bits in qs, the third (inverted) in hmask, 6-bit scales.
func deqQ3_K(src []byte, dst []float32) {
	var scales [16]int8
	for ; len(src) >= 110; src, dst = src[110:], dst[256:] {
		hm := src[0:32]
		q := src[32:96]
		q3kScales(src[96:108], &scales)
		dAll := f16(src[108:])
		y := dst[:256]
		is := 0
		m := uint8(1)
		for n := 0; n < 256; n += 128 {
			for shift := uint(0); shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					dl := dAll * float32(int(scales[is])-32)
					is++
					qq := q[16*half : 16*half+16]
					hh := hm[16*half : 16*half+16]
					out := y[:16]
					for l, b := range qq {
						v := int((b >> shift) & 3)
						if hh[l]&m == 0 {
							v -= 4
						}
						out[l] = dl * float32(v)
					}
					y = y[16:]
				}
				m <<= 1
			}
			q = q[32:]
		}
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: the j-th 6-bit scale and min of
// Q4_K and Q5_K.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return (q[j+4] & 0xF) | ((q[j-4] >> 6) << 4), (q[j+4] >> 4) | ((q[j] >> 6) << 4)
}

func deqQ4_K(src []byte, dst []float32) {
	for ; len(src) >= 144; src, dst = src[144:], dst[256:] {
		d, dmin := f16(src), f16(src[2:])
		scales := src[4:16]
		q := src[16:144]
		y := dst[:256]
		for is := 0; is < 8; is += 2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			qq := q[:32]
			lo, hi := y[:32], y[32:64]
			for l, b := range qq {
				lo[l] = float32(d1*float32(b&0xF)) - m1
				hi[l] = float32(d2*float32(b>>4)) - m2
			}
			q, y = q[32:], y[64:]
		}
	}
}

func deqQ5_K(src []byte, dst []float32) {
	for ; len(src) >= 176; src, dst = src[176:], dst[256:] {
		d, dmin := f16(src), f16(src[2:])
		scales := src[4:16]
		qh := src[16:48]
		ql := src[48:176]
		y := dst[:256]
		u1, u2 := uint8(1), uint8(2)
		for is := 0; is < 8; is += 2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			qq := ql[:32]
			lo, hi := y[:32], y[32:64]
			for l, b := range qq {
				v1, v2 := int(b&0xF), int(b>>4)
				if qh[l]&u1 != 0 {
					v1 += 16
				}
				if qh[l]&u2 != 0 {
					v2 += 16
				}
				lo[l] = float32(d1*float32(v1)) - m1
				hi[l] = float32(d2*float32(v2)) - m2
			}
			ql, y = ql[32:], y[64:]
			u1 <<= 2
			u2 <<= 2
		}
	}
}

func deqQ6_K(src []byte, dst []float32) {
	for ; len(src) >= 210; src, dst = src[210:], dst[256:] {
		ql := src[0:128]
		qh := src[128:192]
		sc := src[192:208]
		d := f16(src[208:])
		y := dst[:256]
		for n := 0; n < 2; n++ {
			// (d*scale)*q as ggml computes d * sc[is] * q; each scale
			// covers 16 consecutive values.
			for g := 0; g < 2; g++ {
				s1 := d * float32(int8(sc[g]))
				s2 := d * float32(int8(sc[g+2]))
				s3 := d * float32(int8(sc[g+4]))
				s4 := d * float32(int8(sc[g+6]))
				l0, l1, h := ql[16*g:16*g+16], ql[32+16*g:48+16*g], qh[16*g:16*g+16]
				o1, o2 := y[16*g:16*g+16], y[32+16*g:48+16*g]
				o3, o4 := y[64+16*g:80+16*g], y[96+16*g:112+16*g]
				for l := range 16 {
					a, b, hh := l0[l], l1[l], h[l]
					o1[l] = s1 * float32(int(a&0xF|(hh&3)<<4)-32)
					o2[l] = s2 * float32(int(b&0xF|(hh>>2&3)<<4)-32)
					o3[l] = s3 * float32(int(a>>4|(hh>>4&3)<<4)-32)
					o4[l] = s4 * float32(int(b>>4|(hh>>6)<<4)-32)
				}
			}
			ql, qh, sc, y = ql[64:], qh[32:], sc[8:], y[128:]
		}
	}
}

var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func deqIQ4_NL(src []byte, dst []float32) {
	for ; len(src) >= 18; src, dst = src[18:], dst[32:] {
		d := f16(src)
		qs := src[2:18]
		y := dst[:32]
		for j, q := range qs {
			y[j] = d * float32(kvaluesIQ4NL[q&0xF])
			y[j+16] = d * float32(kvaluesIQ4NL[q>>4])
		}
	}
}

func deqIQ4_XS(src []byte, dst []float32) {
	for ; len(src) >= 136; src, dst = src[136:], dst[256:] {
		d := f16(src)
		sh := binary.LittleEndian.Uint16(src[2:])
		sl := src[4:8]
		qs := src[8:136]
		y := dst[:256]
		for ib := 0; ib < 8; ib++ {
			ls := int((sl[ib/2]>>(4*(ib%2)))&0xF) | int((sh>>(2*ib))&3)<<4
			dl := d * float32(ls-32)
			q := qs[16*ib : 16*ib+16]
			out := y[32*ib : 32*ib+32]
			for j, b := range q {
				out[j] = dl * float32(kvaluesIQ4NL[b&0xF])
				out[j+16] = dl * float32(kvaluesIQ4NL[b>>4])
			}
		}
	}
}

// ternary returns trit n of a base-3 packed byte as ggml decodes it:
// multiply by 3^n (mod 256), then the top of q*3 is the trit.
func ternary(b byte, pow3 byte) float32 {
	q := b * pow3
	return float32(int16((uint16(q)*3)>>8) - 1)
}

var pow3 = [5]byte{1, 3, 9, 27, 81}

func deqTQ1_0(src []byte, dst []float32) {
	for ; len(src) >= 54; src, dst = src[54:], dst[256:] {
		qs := src[0:48]
		qh := src[48:52]
		d := f16(src[52:])
		y := dst[:256]
		// qs[0:32]: 5 trits each, 160 values; qs[32:48]: 80; qh: 4 trits each, 16.
		for n := 0; n < 5; n++ {
			for m, b := range qs[:32] {
				y[32*n+m] = ternary(b, pow3[n]) * d
			}
		}
		y = y[160:]
		for n := 0; n < 5; n++ {
			for m, b := range qs[32:48] {
				y[16*n+m] = ternary(b, pow3[n]) * d
			}
		}
		y = y[80:]
		for n := 0; n < 4; n++ {
			for j, b := range qh {
				y[4*n+j] = ternary(b, pow3[n]) * d
			}
		}
	}
}

func deqTQ2_0(src []byte, dst []float32) {
	for ; len(src) >= 66; src, dst = src[66:], dst[256:] {
		d := f16(src[64:])
		y := dst[:256]
		for j := 0; j < 64; j += 32 {
			qs := src[j : j+32]
			for l := uint(0); l < 4; l++ {
				out := y[:32]
				for m, b := range qs {
					out[m] = float32(int((b>>(2*l))&3)-1) * d
				}
				y = y[32:]
			}
		}
	}
}

// kvaluesFP4 are the E2M1 values doubled (ggml kvalues_mxfp4); the scales
// below are halved to match.
var kvaluesFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half[x] = 2^(x-128), ggml's GGML_E8M0_TO_FP32_HALF.
var e8m0Half = func() (t [256]float32) {
	for x := range t {
		var bits uint32
		if x < 2 {
			bits = 0x00200000 << x
		} else {
			bits = uint32(x-1) << 23
		}
		t[x] = math.Float32frombits(bits)
	}
	return
}()

// ue4m3Half[x] is half the value of the unsigned E4M3 byte x (bias 7,
// bit 7 ignored), with 0 and 0x7F read as 0: ggml's ggml_ue4m3_to_fp32.
var ue4m3Half = func() (t [256]float32) {
	for x := range t {
		if x == 0 || x == 0x7F {
			continue
		}
		exp, man := (x>>3)&0xF, x&7
		var raw float64
		if exp == 0 {
			raw = math.Ldexp(float64(man), -9)
		} else {
			raw = math.Ldexp(1+float64(man)/8, exp-7)
		}
		t[x] = float32(raw) * 0.5
	}
	return
}()

func deqMXFP4(src []byte, dst []float32) {
	for ; len(src) >= 17; src, dst = src[17:], dst[32:] {
		d := e8m0Half[src[0]]
		qs := src[1:17]
		y := dst[:32]
		for j, q := range qs {
			y[j] = float32(kvaluesFP4[q&0xF]) * d
			y[j+16] = float32(kvaluesFP4[q>>4]) * d
		}
	}
}

func deqNVFP4(src []byte, dst []float32) {
	for ; len(src) >= 36; src, dst = src[36:], dst[64:] {
		for s := 0; s < 4; s++ {
			d := ue4m3Half[src[s]]
			qs := src[4+8*s : 12+8*s]
			y := dst[16*s : 16*s+16]
			for j, q := range qs {
				y[j] = float32(kvaluesFP4[q&0xF]) * d
				y[j+8] = float32(kvaluesFP4[q>>4]) * d
			}
		}
	}
}

func deqQ1_0(src []byte, dst []float32) {
	for ; len(src) >= 18; src, dst = src[18:], dst[128:] {
		d := f16(src)
		pm := [2]float32{-d, d}
		qs := src[2:18]
		y := dst[:128]
		for i, b := range qs {
			out := y[8*i : 8*i+8]
			for k := range out {
				out[k] = pm[(b>>k)&1]
			}
		}
	}
}

func deqQ2_0(src []byte, dst []float32) {
	for ; len(src) >= 18; src, dst = src[18:], dst[64:] {
		d := f16(src)
		// The four codes are -d, 0, d, 2d.
		v := [4]float32{float32(-1) * d, float32(0) * d, float32(1) * d, float32(2) * d}
		qs := src[2:18]
		y := dst[:64]
		for i, b := range qs {
			out := y[4*i : 4*i+4]
			out[0] = v[b&3]
			out[1] = v[b>>2&3]
			out[2] = v[b>>4&3]
			out[3] = v[b>>6]
		}
	}
}
