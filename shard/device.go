package shard

import (
	"encoding/binary"
	"fmt"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/mmapfile"
	"github.com/qnnprep/qnnprep/model"
)

// Container is the integer width Q1_0 and Q2_0 codes are declared in on
// the device. QNN has no 1- or 2-bit datatype (qnn-genie.md §3); both
// containers hold the codes exactly: Q1_0 codes ±1 and Q2_0 codes −1…2
// with the block's scale d.
type Container int

const (
	Container4Bit Container = 4 // default: symmetric 4-bit, two codes per byte
	Container8Bit Container = 8 // symmetric 8-bit, one code per byte
)

// ParseContainer parses "4bit" or "8bit" (or "4", "8").
func ParseContainer(s string) (Container, error) {
	switch s {
	case "4bit", "4":
		return Container4Bit, nil
	case "8bit", "8":
		return Container8Bit, nil
	}
	return 0, fmt.Errorf("container %q, want 4bit or 8bit", s)
}

// Valid reports whether c is one of the containers.
func (c Container) Valid() bool { return c == Container4Bit || c == Container8Bit }

func (c Container) String() string { return fmt.Sprintf("%dbit", int(c)) }

// MarshalText writes "4bit" or "8bit".
func (c Container) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("container %d bits, want 4 or 8", int(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText reads "4bit" or "8bit".
func (c *Container) UnmarshalText(b []byte) error {
	v, err := ParseContainer(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// ScaleOffsetBytes is what one scale of an integer encoding costs on the
// device: QNN's Qnn_ScaleOffset_t (float scale, int32 offset), of which
// per-channel (AXIS_SCALE_OFFSET) and per-block (BLOCK) encodings hold one
// per channel or per block (QnnTypes.h).
const ScaleOffsetBytes = 8

// Layout is how the ONNX export declares a weight tensor to QNN, and so
// what a context binary holds for it. The exporter builds its encodings
// from it (onnx.ParamEncoding), so plan sizes and exported graphs follow
// one rule:
//
//   - Q8_0 whose blocks in every row share one scale (the int8 recipe):
//     8-bit codes, one scale per row (PER_CHANNEL);
//   - other Q8_0: 8-bit codes, one scale per block of 32 (PER_BLOCK);
//   - Q1_0 (block 128) and Q2_0 (block 64): codes in the container's
//     width, one scale per block (PER_BLOCK);
//   - every other type (F32, F16, BF16, other ggml types): a float32
//     initializer without an encoding.
type Layout struct {
	Bits      int   // bits per element: 4 or 8 for integer codes, 32 for float32
	Integer   bool  // integer codes with a scale/offset encoding
	BlockSize int   // elements per scale along a row; 0 means one scale per row
	Scales    int64 // scale/offset pairs (0 for float32)
}

// Bytes is the tensor's size on the device: elements in Bits, plus
// ScaleOffsetBytes per scale.
func (l Layout) Bytes(elements int64) int64 {
	return (elements*int64(l.Bits)+7)/8 + l.Scales*ScaleOffsetBytes
}

// WeightLayout returns t's layout in container c. Telling per-channel from
// per-block Q8_0 reads the tensor's block scales.
func WeightLayout(t *model.Tensor, c Container) (Layout, error) {
	var bs, bits int
	switch t.Type {
	case gguf.Q8_0:
		bs, bits = 32, 8
	case gguf.Q1_0:
		bs, bits = 128, int(c)
	case gguf.Q2_0:
		bs, bits = 64, int(c)
	default:
		return Layout{Bits: 32}, nil
	}
	if !c.Valid() {
		return Layout{}, fmt.Errorf("container %d bits, want 4 or 8", int(c))
	}
	if len(t.Dims) != 2 || t.Dims[0]%int64(bs) != 0 {
		return Layout{}, fmt.Errorf("tensor %q: dims %v are not a matrix of whole %d-element blocks", t.Name, t.Dims, bs)
	}
	rows, nb := t.Rows(), t.Dims[0]/int64(bs)
	l := Layout{Bits: bits, Integer: true, BlockSize: bs, Scales: rows * nb}
	if t.Type == gguf.Q8_0 {
		pc, err := rowScaled(t, int(nb))
		if err != nil {
			return Layout{}, err
		}
		if pc {
			l.BlockSize, l.Scales = 0, rows
		}
	}
	return l, nil
}

// rowScaled reports whether every block of each row of the Q8_0 tensor t
// (nb blocks per row) carries the row's first scale. Only the data can
// tell (a per-block tensor may be copied into a file under any recipe), so
// sizing a Q8_0 model reads its Q8_0 tensors.
func rowScaled(t *model.Tensor, nb int) (bool, error) {
	data, err := t.Data()
	if err != nil {
		return false, err
	}
	defer t.Release()
	bb := t.Type.BlockBytes()
	rb := nb * bb
	if len(data) < rb {
		return true, nil
	}
	// The first row decides a per-block tensor. Read it with pread, not
	// through the mapping: a fault there makes the kernel read around it
	// (up to read_ahead_kb, 8 MiB on the build host), which for a per-block
	// model reads most of the file. A per-channel tensor is read whole
	// either way, and the mapping reads it faster.
	row := make([]byte, rb)
	if !mmapfile.ReadInto(row, data[:rb]) {
		row = data[:rb]
	}
	if !sameScales(row, nb, bb) {
		return false, nil
	}
	for r := rb; r+rb <= len(data); r += rb {
		if !sameScales(data[r:r+rb], nb, bb) {
			return false, nil
		}
	}
	return true, nil
}

// sameScales reports whether the nb blocks of bb bytes in row share the
// first block's fp16 scale.
func sameScales(row []byte, nb, bb int) bool {
	first := binary.LittleEndian.Uint16(row)
	for j := 1; j < nb; j++ {
		if binary.LittleEndian.Uint16(row[j*bb:]) != first {
			return false
		}
	}
	return true
}

// DeviceBytes is t's size on the device in container c (see Layout).
func DeviceBytes(t *model.Tensor, c Container) (int64, error) {
	l, err := WeightLayout(t, c)
	if err != nil {
		return 0, err
	}
	return l.Bytes(t.Elements()), nil
}
