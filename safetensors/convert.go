package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/qnnprep/qnnprep/internal/half"
)

// minifloat decodes an 8-bit (or narrower) float with ebits exponent bits,
// mbits mantissa bits and the given bias. Formats differ only in their
// special codes, which the callers handle before calling it.
func minifloat(code uint8, ebits, mbits uint, bias int) float32 {
	sign := code >> (ebits + mbits) & 1
	e := int(code>>mbits) & (1<<ebits - 1)
	m := float64(code & (1<<mbits - 1))
	var v float64
	if e == 0 { // subnormal: 0.m × 2^(1-bias)
		v = math.Ldexp(m, 1-bias-int(mbits))
	} else {
		v = math.Ldexp(m+float64(int(1)<<mbits), e-bias-int(mbits))
	}
	if sign != 0 {
		v = -v
	}
	return float32(v) // exact: every value fits float32
}

// 256-entry tables for the byte-sized float types, built once.
var (
	tabE4M3 = makeTable(func(c uint8) float32 { // OCP "fn": no inf; S.1111.111 is NaN
		if c&0x7f == 0x7f {
			return float32(math.NaN())
		}
		return minifloat(c, 4, 3, 7)
	})
	tabE5M2 = makeTable(func(c uint8) float32 { // IEEE-like: exponent 31 is inf/NaN
		switch {
		case c&0x7f == 0x7c:
			return float32(math.Inf(1 - 2*int(c>>7)))
		case c&0x7c == 0x7c:
			return float32(math.NaN())
		}
		return minifloat(c, 5, 2, 15)
	})
	tabE8M0 = makeTable(func(c uint8) float32 { // unsigned power of two; 0xFF is NaN
		if c == 0xff {
			return float32(math.NaN())
		}
		return float32(math.Ldexp(1, int(c)-127))
	})
	tabE4M3FNUZ = makeTable(func(c uint8) float32 { // no inf, no -0: 0x80 is NaN
		if c == 0x80 {
			return float32(math.NaN())
		}
		return minifloat(c, 4, 3, 8)
	})
	tabE5M2FNUZ = makeTable(func(c uint8) float32 {
		if c == 0x80 {
			return float32(math.NaN())
		}
		return minifloat(c, 5, 2, 16)
	})
	// F4 is E2M1 (bias 1, no inf/NaN); indexed by a nibble.
	tabF4 = func() (t [16]float32) {
		for c := range t {
			t[c] = minifloat(uint8(c), 2, 1, 1)
		}
		return
	}()
)

func makeTable(f func(uint8) float32) *[256]float32 {
	var t [256]float32
	for c := range t {
		t[c] = f(uint8(c))
	}
	return &t
}

// Float32 converts the tensor called name to float32 into dst, whose
// length must be the tensor's element count. Floats of up to 32 bits and
// integers of up to 24 bits convert exactly; F64 and wider integers round
// to nearest. BOOL gives 0 or 1; F4 is E2M1, two values per byte, low
// nibble first. C64 and the packed F6 types cannot be converted.
func (m *Model) Float32(name string, dst []float32) error {
	t, ok := m.Tensor(name)
	if !ok {
		return &FormatError{File: m.Dir, Tensor: name, Err: ErrNotFound, Msg: "no such tensor"}
	}
	if n := t.Elements(); int64(len(dst)) != n {
		return &FormatError{File: t.File, Tensor: name, Err: ErrConvert, Msg: fmt.Sprintf("destination holds %d values, tensor has %d", len(dst), n)}
	}
	src, err := m.Data(name)
	if err != nil {
		return err
	}
	if err := convert(t.Dtype, src, dst); err != nil {
		return at(err, t.File, name)
	}
	return nil
}

// convert decodes src (little-endian elements of dtype d) into dst.
// len(src) must be the byte size of len(dst) elements.
func convert(d Dtype, src []byte, dst []float32) error {
	if bits := int64(d.Bits()); bits == 0 || int64(len(src))*8 != int64(len(dst))*bits {
		return errorf(ErrConvert, "%d bytes of %s do not hold %d values", len(src), d, len(dst))
	}
	le := binary.LittleEndian
	switch d {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(le.Uint64(src[8*i:])))
		}
	case F16:
		if len(dst) > 0 {
			half.F16SliceToF32(dst, src)
		}
	case BF16:
		if len(dst) > 0 {
			half.BF16SliceToF32(dst, src)
		}
	case F8_E4M3:
		lookup(tabE4M3, src, dst)
	case F8_E5M2:
		lookup(tabE5M2, src, dst)
	case F8_E8M0:
		lookup(tabE8M0, src, dst)
	case F8_E4M3FNUZ:
		lookup(tabE4M3FNUZ, src, dst)
	case F8_E5M2FNUZ:
		lookup(tabE5M2FNUZ, src, dst)
	case F4:
		for i := range dst {
			dst[i] = tabF4[src[i/2]>>(4*(i%2))&0xf]
		}
	case BOOL:
		for i, b := range src {
			dst[i] = 0
			if b != 0 {
				dst[i] = 1
			}
		}
	case U8:
		for i, b := range src {
			dst[i] = float32(b)
		}
	case I8:
		for i, b := range src {
			dst[i] = float32(int8(b))
		}
	case U16:
		for i := range dst {
			dst[i] = float32(le.Uint16(src[2*i:]))
		}
	case I16:
		for i := range dst {
			dst[i] = float32(int16(le.Uint16(src[2*i:])))
		}
	case U32:
		for i := range dst {
			dst[i] = float32(le.Uint32(src[4*i:]))
		}
	case I32:
		for i := range dst {
			dst[i] = float32(int32(le.Uint32(src[4*i:])))
		}
	case U64:
		for i := range dst {
			dst[i] = float32(le.Uint64(src[8*i:]))
		}
	case I64:
		for i := range dst {
			dst[i] = float32(int64(le.Uint64(src[8*i:])))
		}
	default: // C64, F6_E2M3, F6_E3M2
		return errorf(ErrConvert, "no float32 conversion for %s", d)
	}
	return nil
}

func lookup(t *[256]float32, src []byte, dst []float32) {
	for i, b := range src {
		dst[i] = t[b]
	}
}
