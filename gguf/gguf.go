// Package gguf reads and writes GGUF files, the model container of ggml
// and llama.cpp, and dequantizes the ggml tensor types to float32.
//
// The reader accepts GGUF v2 and v3 and applies the same checks ggml's
// gguf_init_from_file does (unique keys and tensor names, at most four
// dimensions, whole blocks per row, a power-of-two UINT32
// general.alignment, each tensor offset equal to the running padded sum),
// so a file accepted here is accepted by llama.cpp and the other way
// round. Every count and length in the file is checked against the bytes
// left before anything is allocated for it.
//
// The writer emits v3 with the layout ggml's gguf_write_to_file produces:
// key/value pairs and tensors in the order given, the data section and
// every tensor (the last one too) padded with zeros to the alignment, and
// no padding at all when there are no tensors.
package gguf

import (
	"fmt"
	"strconv"
)

// Format constants.
const (
	Magic            = "GGUF"
	Version          = 3  // the version the writer emits
	DefaultAlignment = 32 // GGUF_DEFAULT_ALIGNMENT
	MaxDims          = 4  // GGML_MAX_DIMS
	MaxNameLength    = 63 // tensor names are < GGML_MAX_NAME (64) bytes

	// AlignmentKey is the metadata key that overrides DefaultAlignment.
	AlignmentKey = "general.alignment"

	// ggml's reader limits (gguf.cpp GGUF_MAX_STRING_LENGTH and
	// GGUF_MAX_ARRAY_ELEMENTS).
	maxStringLength  = 1 << 30
	maxArrayElements = 1 << 30
)

// FormatError reports a malformed GGUF file or a value the writer cannot
// encode.
type FormatError struct {
	File   string // file name, "" for the writer without one
	Key    string // metadata key involved, if any
	Tensor string // tensor involved, if any
	Offset int64  // byte offset in the file where it was found, or -1
	Msg    string
}

func (e *FormatError) Error() string {
	s := "gguf: "
	if e.File != "" {
		s += e.File + ": "
	}
	if e.Key != "" {
		s += "key " + strconv.Quote(e.Key) + ": "
	}
	if e.Tensor != "" {
		s += "tensor " + strconv.Quote(e.Tensor) + ": "
	}
	s += e.Msg
	if e.Offset >= 0 {
		s += fmt.Sprintf(" (at byte %d)", e.Offset)
	}
	return s
}

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	Name   string
	Dims   []int64 // ggml ne order: Dims[0] is the row length
	Type   Type
	Offset uint64 // relative to the data section
}

// Elements is the number of elements, the product of Dims (1 for no dims).
func (t *TensorInfo) Elements() int64 { return elements(t.Dims) }

// Bytes is the size of the tensor data per the type table, without padding.
// It is 0 for an invalid type.
func (t *TensorInfo) Bytes() int64 {
	bs := int64(t.Type.BlockSize())
	if bs == 0 {
		return 0
	}
	return t.Elements() / bs * int64(t.Type.BlockBytes())
}

func elements(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// checkShape applies ggml's tensor checks: at most MaxDims dims, none
// negative, a whole number of blocks per row, and an element count and
// byte size that fit in an int64. It returns the byte size.
func checkShape(dims []int64, typ Type) (int64, string) {
	if len(dims) > MaxDims {
		return 0, fmt.Sprintf("%d dimensions, at most %d allowed", len(dims), MaxDims)
	}
	if !typ.Valid() {
		return 0, fmt.Sprintf("invalid ggml type %d, expected a type id below %d that ggml still defines", uint32(typ), uint32(TypeCount))
	}
	ne := [MaxDims]int64{1, 1, 1, 1}
	for i, d := range dims {
		if d < 0 {
			return 0, fmt.Sprintf("dimension %d is %d, expected >= 0", i, d)
		}
		ne[i] = d
	}
	bs := int64(typ.BlockSize())
	if ne[0]%bs != 0 {
		return 0, fmt.Sprintf("row length %d is not a multiple of %s's block size %d", ne[0], typ, bs)
	}
	if ne[0] == 0 || ne[1] == 0 || ne[2] == 0 || ne[3] == 0 {
		return 0, ""
	}
	// The same overflow test as ggml, so the same shapes are refused.
	const maxInt64 = 1<<63 - 1
	if maxInt64/ne[1] <= ne[0] || maxInt64/ne[2] <= ne[0]*ne[1] || maxInt64/ne[3] <= ne[0]*ne[1]*ne[2] {
		return 0, fmt.Sprintf("shape %v has too many elements", dims)
	}
	blocks := ne[0] * ne[1] * ne[2] * ne[3] / bs
	if blocks > maxInt64/int64(typ.BlockBytes()) {
		return 0, fmt.Sprintf("shape %v of type %s is too large", dims, typ)
	}
	return blocks * int64(typ.BlockBytes()), ""
}

// pad rounds x up to a multiple of the power of two a (GGML_PAD).
func pad(x, a int64) int64 { return (x + a - 1) &^ (a - 1) }

func isPowerOfTwo(x uint64) bool { return x != 0 && x&(x-1) == 0 }
