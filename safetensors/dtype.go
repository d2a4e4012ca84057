package safetensors

// Dtype is a safetensors element type name as it appears in the header,
// for example "F32", "BF16" or "F8_E4M3".
type Dtype string

// The dtypes of the format (huggingface/safetensors tensor.rs enum Dtype).
const (
	BOOL        Dtype = "BOOL"
	F4          Dtype = "F4"      // E2M1, two values per byte, low nibble first
	F6_E2M3     Dtype = "F6_E2M3" // 6-bit float, packed
	F6_E3M2     Dtype = "F6_E3M2" // 6-bit float, packed
	U8          Dtype = "U8"
	I8          Dtype = "I8"
	F8_E5M2     Dtype = "F8_E5M2"     // IEEE-like, bias 15, has inf
	F8_E4M3     Dtype = "F8_E4M3"     // "fn": bias 7, no inf, S.1111.111 is NaN
	F8_E8M0     Dtype = "F8_E8M0"     // exponent only, bias 127, 0xFF is NaN
	F8_E4M3FNUZ Dtype = "F8_E4M3FNUZ" // bias 8, no inf, no -0: 0x80 is NaN
	F8_E5M2FNUZ Dtype = "F8_E5M2FNUZ" // bias 16, no inf, no -0: 0x80 is NaN
	I16         Dtype = "I16"
	U16         Dtype = "U16"
	F16         Dtype = "F16"
	BF16        Dtype = "BF16"
	I32         Dtype = "I32"
	U32         Dtype = "U32"
	F32         Dtype = "F32"
	C64         Dtype = "C64" // complex: two F32
	F64         Dtype = "F64"
	I64         Dtype = "I64"
	U64         Dtype = "U64"
)

// dtypes lists every dtype in the order of the Rust enum, which is
// increasing alignment; the writer sorts by this rank (descending), as the
// Rust writer does with the enum's derived ordering.
var dtypes = []struct {
	d    Dtype
	bits int
}{
	{BOOL, 8}, {F4, 4}, {F6_E2M3, 6}, {F6_E3M2, 6}, {U8, 8}, {I8, 8},
	{F8_E5M2, 8}, {F8_E4M3, 8}, {F8_E8M0, 8}, {F8_E4M3FNUZ, 8}, {F8_E5M2FNUZ, 8},
	{I16, 16}, {U16, 16}, {F16, 16}, {BF16, 16}, {I32, 32}, {U32, 32}, {F32, 32},
	{C64, 64}, {F64, 64}, {I64, 64}, {U64, 64},
}

var dtypeIndex = func() map[Dtype]int {
	m := make(map[Dtype]int, len(dtypes))
	for i, e := range dtypes {
		m[e.d] = i
	}
	return m
}()

// Bits returns the size of one element in bits, or 0 for an unknown dtype.
func (d Dtype) Bits() int {
	if i, ok := dtypeIndex[d]; ok {
		return dtypes[i].bits
	}
	return 0
}

// Valid reports whether d is a dtype of the format.
func (d Dtype) Valid() bool { _, ok := dtypeIndex[d]; return ok }

// rank is the position of d in the Rust enum (-1 if unknown).
func (d Dtype) rank() int {
	if i, ok := dtypeIndex[d]; ok {
		return i
	}
	return -1
}

// Dtypes returns every dtype of the format in increasing alignment order.
func Dtypes() []Dtype {
	out := make([]Dtype, len(dtypes))
	for i, e := range dtypes {
		out[i] = e.d
	}
	return out
}

// byteSize returns numel(shape)*bits/8, checking for overflow, negative
// dimensions and element counts that do not fill whole bytes.
func byteSize(d Dtype, shape []int64) (int64, error) {
	bits := d.Bits()
	if bits == 0 {
		return 0, errorf(ErrDtype, "unknown dtype %q", string(d))
	}
	n := int64(1)
	for _, s := range shape {
		if s < 0 {
			return 0, errorf(ErrShape, "shape %v has a negative dimension", shape)
		}
		if s != 0 && n > maxInt64/s {
			return 0, errorf(ErrShape, "shape %v: element count overflows int64", shape)
		}
		n *= s
	}
	if n > maxInt64/int64(bits) {
		return 0, errorf(ErrShape, "shape %v: byte size of %s overflows int64", shape, d)
	}
	if n*int64(bits)%8 != 0 {
		return 0, errorf(ErrSize, "shape %v of %s is %d bits, not a whole number of bytes", shape, d, n*int64(bits))
	}
	return n * int64(bits) / 8, nil
}

const maxInt64 = 1<<63 - 1
