package safetensors

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"testing"
)

// openOne writes a single tensor to a temp file and opens it.
func openOne(t *testing.T, dt Dtype, shape []int64, data []byte) *Model {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.safetensors")
	if err := WriteFile(p, &Writer{Tensors: []WriterTensor{{Name: "x", Dtype: dt, Shape: shape, Data: Bytes(data)}}}); err != nil {
		t.Fatal(err)
	}
	m, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func allCodes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// refFloat is the value of a sign/exponent/mantissa code straight from the
// definition: (−1)^s · 2^(e−bias) · (1 + m/2^M), or 2^(1−bias) · m/2^M for
// e = 0. Specials are handled by the callers.
func refFloat(code uint8, ebits, mbits, bias int) float64 {
	s := int(code) >> (ebits + mbits) & 1
	e := int(code) >> mbits & (1<<ebits - 1)
	frac := float64(int(code)&(1<<mbits-1)) / math.Pow(2, float64(mbits))
	v := math.Pow(2, float64(1-bias)) * frac
	if e != 0 {
		v = math.Pow(2, float64(e-bias)) * (1 + frac)
	}
	if s == 1 {
		v = -v
	}
	return v
}

func TestFloat8AllCodes(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		dt  Dtype
		ref func(c uint8) float64
		// anchors: published values of the format (OCP FP8 spec, ONNX
		// float8 types) that any implementation must reproduce.
		anchors map[uint8]float64
	}{
		{F8_E4M3, func(c uint8) float64 {
			if c&0x7f == 0x7f { // S.1111.111 is NaN; no infinities
				return nan
			}
			return refFloat(c, 4, 3, 7)
		}, map[uint8]float64{0x38: 1, 0x7e: 448, 0xfe: -448, 0x01: math.Pow(2, -9), 0x08: math.Pow(2, -6), 0x80: math.Copysign(0, -1), 0x78: 256, 0x7f: nan}},
		{F8_E5M2, func(c uint8) float64 {
			switch e := c >> 2 & 0x1f; {
			case e == 31 && c&3 == 0:
				return math.Inf(1 - 2*int(c>>7))
			case e == 31:
				return nan
			}
			return refFloat(c, 5, 2, 15)
		}, map[uint8]float64{0x3c: 1, 0x7b: 57344, 0x7c: math.Inf(1), 0xfc: math.Inf(-1), 0x7d: nan, 0x01: math.Pow(2, -16), 0x04: math.Pow(2, -14)}},
		{F8_E8M0, func(c uint8) float64 {
			if c == 0xff {
				return nan
			}
			return math.Pow(2, float64(int(c)-127))
		}, map[uint8]float64{0x7f: 1, 0x00: math.Pow(2, -127), 0xfe: math.Pow(2, 127), 0x80: 2, 0xff: nan}},
		{F8_E4M3FNUZ, func(c uint8) float64 {
			if c == 0x80 { // the only NaN; no −0, no infinities
				return nan
			}
			return refFloat(c, 4, 3, 8)
		}, map[uint8]float64{0x40: 1, 0x7f: 240, 0xff: -240, 0x01: math.Pow(2, -10), 0x80: nan, 0x00: 0}},
		{F8_E5M2FNUZ, func(c uint8) float64 {
			if c == 0x80 {
				return nan
			}
			return refFloat(c, 5, 2, 16)
		}, map[uint8]float64{0x40: 1, 0x7f: 57344, 0x01: math.Pow(2, -17), 0x7c: 32768, 0x80: nan}},
	}
	for _, tt := range tests {
		t.Run(string(tt.dt), func(t *testing.T) {
			m := openOne(t, tt.dt, []int64{16, 16}, allCodes())
			got := make([]float32, 256)
			if err := m.Float32("x", got); err != nil {
				t.Fatal(err)
			}
			for c := range 256 {
				want := tt.ref(uint8(c))
				if a, ok := tt.anchors[uint8(c)]; ok && !same(a, want) {
					t.Fatalf("reference formula gives %v for 0x%02x, spec says %v", want, c, a)
				}
				if !same(float64(got[c]), want) {
					t.Errorf("0x%02x: got %v, want %v", c, got[c], want)
				}
				if !math.IsNaN(want) && float64(float32(want)) != want {
					t.Errorf("0x%02x: %v not exact in float32", c, want)
				}
			}
		})
	}
}

// same compares values including NaN and the sign of zero.
func same(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return a == b && math.Signbit(a) == math.Signbit(b)
}

func TestFloat4(t *testing.T) {
	// OCP MX FP4 E2M1 values for codes 0..7; bit 3 is the sign.
	e2m1 := []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	m := openOne(t, F4, []int64{512}, allCodes()) // 512 nibbles
	got := make([]float32, 512)
	if err := m.Float32("x", got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		nib := byte(i/2) >> (4 * (i % 2)) & 0xf // low nibble first
		want := e2m1[nib&7]
		if nib&8 != 0 {
			want = -want
		}
		if !same(float64(v), want) {
			t.Fatalf("element %d (byte 0x%02x): got %v, want %v", i, i/2, v, want)
		}
	}
}

func TestFloat32Conversions(t *testing.T) {
	le := binary.LittleEndian
	u16 := func(v ...uint16) []byte {
		var b []byte
		for _, x := range v {
			b = le.AppendUint16(b, x)
		}
		return b
	}
	u32 := func(v ...uint32) []byte {
		var b []byte
		for _, x := range v {
			b = le.AppendUint32(b, x)
		}
		return b
	}
	u64 := func(v ...uint64) []byte {
		var b []byte
		for _, x := range v {
			b = le.AppendUint64(b, x)
		}
		return b
	}
	neg := func(x int64) uint64 { return uint64(x) }
	tests := []struct {
		dt   Dtype
		data []byte
		want []float64
	}{
		{F32, u32(0x3f800000, 0xc0490fdb, 0x7f800000), []float64{1, float64(float32(-math.Pi)), math.Inf(1)}},
		{F64, u64(math.Float64bits(0.1), math.Float64bits(-1e300), math.Float64bits(1.5)), []float64{float64(float32(0.1)), math.Inf(-1), 1.5}},
		{F16, u16(0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000), []float64{1, -2, 65504, math.Pow(2, -24), math.Copysign(0, -1)}},
		{BF16, u16(0x3f80, 0xc049, 0x7f80, 0x0001), []float64{1, -3.140625, math.Inf(1), math.Pow(2, -133)}},
		{BOOL, []byte{0, 1, 2, 255}, []float64{0, 1, 1, 1}},
		{U8, []byte{0, 255}, []float64{0, 255}},
		{I8, []byte{0x80, 0x7f, 0xff}, []float64{-128, 127, -1}},
		{U16, u16(65535, 1), []float64{65535, 1}},
		{I16, u16(0x8000, 0xffff), []float64{-32768, -1}},
		{U32, u32(1<<32-1, 16777217), []float64{1 << 32, 16777216}},
		{I32, u32(1<<31, 0xffffffff), []float64{-(1 << 31), -1}},
		{U64, u64(1<<64-1, 1<<53+1), []float64{1 << 64, 1 << 53}},
		{I64, u64(neg(math.MinInt64), neg(-3)), []float64{-(1 << 63), -3}},
	}
	for _, tt := range tests {
		t.Run(string(tt.dt), func(t *testing.T) {
			m := openOne(t, tt.dt, []int64{int64(len(tt.want))}, tt.data)
			got := make([]float32, len(tt.want))
			if err := m.Float32("x", got); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if !same(float64(got[i]), tt.want[i]) {
					t.Errorf("[%d] = %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestFloat32Errors(t *testing.T) {
	for _, dt := range []Dtype{C64, F6_E2M3, F6_E3M2} {
		m := openOne(t, dt, []int64{4}, make([]byte, 4*dt.Bits()/8))
		if err := m.Float32("x", make([]float32, 4)); !errors.Is(err, ErrConvert) {
			t.Errorf("%s: %v", dt, err)
		}
	}
	m := openOne(t, F32, []int64{2}, make([]byte, 8))
	if err := m.Float32("x", make([]float32, 3)); !errors.Is(err, ErrConvert) {
		t.Errorf("wrong length: %v", err)
	}
	if err := m.Float32("y", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing tensor: %v", err)
	}
	if _, err := m.Data("y"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing tensor: %v", err)
	}
	// Empty and 0-rank tensors convert.
	for _, shape := range [][]int64{{0}, {3, 0}} {
		m := openOne(t, F16, shape, nil)
		if err := m.Float32("x", nil); err != nil {
			t.Errorf("empty %v: %v", shape, err)
		}
	}
	m = openOne(t, BF16, []int64{}, []byte{0x80, 0x3f})
	v := make([]float32, 1)
	if err := m.Float32("x", v); err != nil || v[0] != 1 {
		t.Errorf("scalar: %v %v", v, err)
	}
}

func TestDtypeBits(t *testing.T) {
	// formats.md §2, from the Rust enum.
	want := map[Dtype]int{BOOL: 8, F4: 4, F6_E2M3: 6, F6_E3M2: 6, U8: 8, I8: 8, F8_E5M2: 8, F8_E4M3: 8, F8_E8M0: 8,
		F8_E4M3FNUZ: 8, F8_E5M2FNUZ: 8, I16: 16, U16: 16, F16: 16, BF16: 16, I32: 32, U32: 32, F32: 32, C64: 64,
		F64: 64, I64: 64, U64: 64}
	if len(Dtypes()) != len(want) {
		t.Fatalf("%d dtypes, want %d", len(Dtypes()), len(want))
	}
	for d, b := range want {
		if d.Bits() != b || !d.Valid() {
			t.Errorf("%s: %d bits", d, d.Bits())
		}
	}
	if Dtype("F8").Bits() != 0 || Dtype("f32").Valid() {
		t.Error("unknown dtype accepted")
	}
}
