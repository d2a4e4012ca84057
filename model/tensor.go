package model

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/internal/mmapfile"
)

// Tensor is one canonical tensor: a llama.cpp GGUF name, ggml dims and
// the bytes of one ggml type. The bytes are produced on demand, so opening
// a model costs nothing per tensor; a tensor read straight from a file is a
// zero-copy slice of its mapping, a transformed one is computed per call.
type Tensor struct {
	Name string    // canonical = llama.cpp GGUF name ("blk.3.attn_q.weight")
	Dims []int64   // ggml ne order (Dims[0] = row length)
	Type gguf.Type // type of the bytes Data returns

	load   func() ([]byte, error)
	mapped bool    // load returns a view of a file mapping (no transform)
	from   *Tensor // the tensor a transformed one is computed from
	src    string  // where the bytes come from, for messages ("" = Name)
	bad    string  // why the source cannot be used (reported by Open)

	rowPerm func() []int // set when Data is from's rows in this order (from.Dims == Dims)
}

// PermutedRows reports whether t's bytes are the rows of another tensor
// (same type and dims) in a different order: row r of t is row idx[r] of
// base. A streaming reader can then read base's rows in place instead of
// having Data gather a copy. idx is checked to be a permutation.
func (t *Tensor) PermutedRows() (base *Tensor, idx []int, ok bool) {
	if t.rowPerm == nil || t.from == nil {
		return nil, nil, false
	}
	idx = t.rowPerm()
	rows := t.Rows()
	if int64(len(idx)) != rows {
		return nil, nil, false
	}
	seen := make([]bool, len(idx))
	for _, r := range idx {
		if r < 0 || r >= len(idx) || seen[r] {
			return nil, nil, false
		}
		seen[r] = true
	}
	return t.from, idx, true
}

// NewTensor returns an in-memory tensor over data (not copied).
func NewTensor(name string, dims []int64, typ gguf.Type, data []byte) *Tensor {
	return &Tensor{Name: name, Dims: dims, Type: typ, load: func() ([]byte, error) { return data, nil }}
}

// LazyTensor returns a tensor whose bytes load computes on every Data call.
func LazyTensor(name string, dims []int64, typ gguf.Type, load func() ([]byte, error)) *Tensor {
	return &Tensor{Name: name, Dims: dims, Type: typ, load: load}
}

// Elements is the product of the dims (0 for a tensor without dims).
func (t *Tensor) Elements() int64 {
	if len(t.Dims) == 0 {
		return 0
	}
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Rows is the number of rows of Dims[0] elements.
func (t *Tensor) Rows() int64 {
	if len(t.Dims) == 0 || t.Dims[0] == 0 {
		return 0
	}
	return t.Elements() / t.Dims[0]
}

// Bytes is the size of the tensor's data in its type, or -1 when the row
// length is not a whole number of the type's blocks.
func (t *Tensor) Bytes() int64 {
	n, err := t.size()
	if err != nil {
		return -1
	}
	return n
}

// size checks the dims (positive, product fits in int64) and returns the
// byte size of the data.
func (t *Tensor) size() (int64, error) {
	if len(t.Dims) == 0 || len(t.Dims) > 4 {
		return 0, fmt.Errorf("%d dims, want 1 to 4", len(t.Dims))
	}
	n := int64(1)
	for _, d := range t.Dims {
		if d <= 0 || n > math.MaxInt64/d {
			return 0, fmt.Errorf("bad dims %v", t.Dims)
		}
		n *= d
	}
	if !t.Type.Valid() {
		return 0, fmt.Errorf("invalid type %v", t.Type)
	}
	rb, err := t.Type.RowBytes(t.Dims[0])
	if err != nil {
		return 0, err
	}
	rows := n / t.Dims[0]
	if rows > math.MaxInt64/rb {
		return 0, fmt.Errorf("bad dims %v", t.Dims)
	}
	return rb * rows, nil
}

func (t *Tensor) where() string {
	if t.Name == "" {
		return t.src
	}
	if t.src != "" && t.src != t.Name {
		return fmt.Sprintf("%s (%s)", t.Name, t.src)
	}
	return t.Name
}

// Data returns the tensor's bytes in Type. For a tensor read from a file
// without a transform this is a zero-copy view: do not modify it.
func (t *Tensor) Data() ([]byte, error) {
	want, err := t.size()
	if err != nil {
		return nil, fmt.Errorf("model: tensor %s: %w", t.where(), err)
	}
	if t.load == nil {
		return nil, fmt.Errorf("model: tensor %s: no data", t.where())
	}
	b, err := t.load()
	if err != nil {
		return nil, fmt.Errorf("model: tensor %s: %w", t.where(), err)
	}
	if int64(len(b)) != want {
		return nil, fmt.Errorf("model: tensor %s: %d bytes of data, want %d for %v %v",
			t.where(), len(b), want, t.Type, t.Dims)
	}
	return b, nil
}

// Float32 returns a float32 copy of the tensor's values (dequantized or
// converted from F16/BF16/F64/integers).
func (t *Tensor) Float32() ([]float32, error) {
	b, err := t.Data()
	if err != nil {
		return nil, err
	}
	out := make([]float32, t.Elements())
	if err := decodeFloat32(t.Type, b, out); err != nil {
		return nil, fmt.Errorf("model: tensor %s: %w", t.where(), err)
	}
	return out, nil
}

// Release gives the pages behind a tensor read straight from a mapped
// file (or the file tensor a transformed one is computed from) back to the
// kernel; they are read from the file again if the tensor
// is used later. Streaming commands call it after each tensor so their
// resident set stays bounded by what they hold, not by the model size.
func (t *Tensor) Release() {
	if t.from != nil {
		t.from.Release()
	}
	if !t.mapped {
		return
	}
	if b, err := t.load(); err == nil {
		mmapfile.Release(b)
	}
}

// WriteTo writes Data to w; it lets a Tensor be a gguf.WriterTensor's Data.
func (t *Tensor) WriteTo(w io.Writer) (int64, error) {
	b, err := t.Data()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}

// decodeFloat32 converts len(dst) values of type typ from src.
func decodeFloat32(typ gguf.Type, src []byte, dst []float32) error {
	le := binary.LittleEndian
	switch typ {
	case gguf.F32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
	case gguf.F16:
		half.F16SliceToF32(dst, src)
	case gguf.BF16:
		half.BF16SliceToF32(dst, src)
	case gguf.F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(le.Uint64(src[8*i:])))
		}
	case gguf.I8:
		for i := range dst {
			dst[i] = float32(int8(src[i]))
		}
	case gguf.I16:
		for i := range dst {
			dst[i] = float32(int16(le.Uint16(src[2*i:])))
		}
	case gguf.I32:
		for i := range dst {
			dst[i] = float32(int32(le.Uint32(src[4*i:])))
		}
	case gguf.I64:
		for i := range dst {
			dst[i] = float32(int64(le.Uint64(src[8*i:])))
		}
	default:
		if !gguf.CanDequantize(typ) {
			return fmt.Errorf("cannot convert %v to float32", typ)
		}
		return gguf.Dequantize(typ, src, dst)
	}
	return nil
}

// encodeFloat32 stores src as little-endian F32 bytes.
func encodeFloat32(src []float32) []byte {
	out := make([]byte, 4*len(src))
	for i, v := range src {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}
