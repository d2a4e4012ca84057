package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// WriterTensor is one tensor to write. Data must write exactly the
// tensor's size per the type table (see TensorInfo.Bytes); it may be nil
// for a tensor with no elements.
type WriterTensor struct {
	Name string
	Dims []int64 // ggml ne order
	Type Type
	Data io.WriterTo
}

// Writer writes a GGUF v3 file. Pairs and tensors are written in the order
// given. Alignment 0 means the general.alignment value in Metadata, or 32
// if there is none; any other alignment that is not 32 is recorded as
// general.alignment (appended when Metadata lacks it).
type Writer struct {
	Alignment int64
	Metadata  Metadata
	Tensors   []WriterTensor
}

// Bytes returns a WriterTo that writes b, for WriterTensor.Data.
func Bytes(b []byte) io.WriterTo { return byteData(b) }

type byteData []byte

func (b byteData) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}

// WriteFile writes w to path through a temporary file that is renamed into
// place only when complete.
func WriteFile(path string, w *Writer) error {
	f, err := atomicfile.Create(path)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer f.Abort()
	if _, err := w.WriteTo(f); err != nil {
		var fe *FormatError
		if errors.As(err, &fe) && fe.File == "" {
			fe.File = path
			return fe
		}
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// Layout validates w and returns the alignment, the metadata that will be
// written (Metadata plus general.alignment when needed) and the tensor
// infos with their data offsets, exactly as WriteTo will write them.
func (w *Writer) Layout() (align int64, md Metadata, infos []TensorInfo, err error) {
	werr := func(key, tensor, format string, args ...any) error {
		return &FormatError{Key: key, Tensor: tensor, Offset: -1, Msg: fmt.Sprintf(format, args...)}
	}
	md = w.Metadata
	seen := make(map[string]bool, len(md))
	for _, kv := range md {
		if kv.Key == "" {
			return 0, nil, nil, werr("", "", "empty metadata key")
		}
		if seen[kv.Key] {
			return 0, nil, nil, werr(kv.Key, "", "duplicate key")
		}
		seen[kv.Key] = true
		if _, _, ok := TypeOf(kv.Value); !ok {
			return 0, nil, nil, werr(kv.Key, "", "value of Go type %T cannot be stored in GGUF", kv.Value)
		}
	}
	align = DefaultAlignment
	if v, ok := md.Get(AlignmentKey); ok {
		a, ok := v.(uint32)
		if !ok {
			return 0, nil, nil, werr(AlignmentKey, "", "must be a uint32, not %T", v)
		}
		if !isPowerOfTwo(uint64(a)) {
			return 0, nil, nil, werr(AlignmentKey, "", "alignment %d is not a non-zero power of two", a)
		}
		if w.Alignment != 0 && w.Alignment != int64(a) {
			return 0, nil, nil, werr(AlignmentKey, "", "is %d but Writer.Alignment is %d", a, w.Alignment)
		}
		align = int64(a)
	} else if w.Alignment != 0 {
		if w.Alignment < 0 || w.Alignment > math.MaxUint32 || !isPowerOfTwo(uint64(w.Alignment)) {
			return 0, nil, nil, werr("", "", "alignment %d is not a power of two that fits in a uint32", w.Alignment)
		}
		align = w.Alignment
		if align != DefaultAlignment {
			md = append(md[:len(md):len(md)], KV{AlignmentKey, uint32(align)})
		}
	}

	infos = make([]TensorInfo, len(w.Tensors))
	names := make(map[string]bool, len(w.Tensors))
	var off int64
	for i, t := range w.Tensors {
		if len(t.Name) > MaxNameLength {
			return 0, nil, nil, werr("", t.Name, "name is %d bytes long, at most %d allowed", len(t.Name), MaxNameLength)
		}
		if strings.IndexByte(t.Name, 0) >= 0 {
			return 0, nil, nil, werr("", t.Name, "name contains a NUL byte")
		}
		if names[t.Name] {
			return 0, nil, nil, werr("", t.Name, "duplicate tensor name")
		}
		names[t.Name] = true
		n, msg := checkShape(t.Dims, t.Type)
		if msg != "" {
			return 0, nil, nil, werr("", t.Name, "%s", msg)
		}
		if t.Data == nil && n > 0 {
			return 0, nil, nil, werr("", t.Name, "no data for %d bytes", n)
		}
		infos[i] = TensorInfo{Name: t.Name, Dims: t.Dims, Type: t.Type, Offset: uint64(off)}
		if off > math.MaxInt64-pad(n, align) {
			return 0, nil, nil, werr("", t.Name, "data section larger than 2^63 bytes")
		}
		off += pad(n, align)
	}
	return align, md, infos, nil
}

// WriteTo writes the file to out, streaming each tensor's data, and returns
// the number of bytes written. It fails if a tensor writes a number of
// bytes other than its size.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	align, md, infos, err := w.Layout()
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: out}
	e := &encoder{w: bufio.NewWriterSize(cw, 64<<10)}

	e.raw([]byte(Magic))
	e.u32(Version)
	e.u64(uint64(len(infos)))
	e.u64(uint64(len(md)))
	for _, kv := range md {
		e.str(kv.Key)
		e.value(kv.Value)
	}
	for _, t := range infos {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(uint64(d))
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
	}
	if len(infos) > 0 {
		e.zeros(pad(e.n, align) - e.n)
	}
	if e.err != nil {
		return cw.n, e.err
	}
	for i := range infos {
		t := &infos[i]
		n := t.Bytes()
		if w.Tensors[i].Data != nil {
			tc := &countWriter{w: e.w}
			_, err := w.Tensors[i].Data.WriteTo(tc)
			if err != nil {
				return cw.n, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
			}
			if tc.n != n {
				return cw.n, &FormatError{Tensor: t.Name, Offset: -1,
					Msg: fmt.Sprintf("data wrote %d bytes, expected %d for %s %v", tc.n, n, t.Type, t.Dims)}
			}
		}
		e.n += n
		e.zeros(pad(n, align) - n)
		if e.err != nil {
			return cw.n, e.err
		}
	}
	if err := e.w.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// encoder writes little-endian values and remembers the first error.
type encoder struct {
	w   *bufio.Writer
	n   int64 // header bytes written, for the padding
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	_, e.err = e.w.Write(b)
	e.n += int64(len(b))
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.raw(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.raw(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err != nil {
		return
	}
	_, e.err = e.w.WriteString(s)
	e.n += int64(len(s))
}

var zeroPad [256]byte

func (e *encoder) zeros(n int64) {
	for n > 0 {
		k := min(n, int64(len(zeroPad)))
		e.raw(zeroPad[:k])
		n -= k
	}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// value writes the type and the value; the type was checked by Layout.
func (e *encoder) value(v any) {
	t, et, _ := TypeOf(v)
	e.u32(uint32(t))
	if t == Array {
		e.u32(uint32(et))
	}
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		e.u8(b2u(x))
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case []uint8:
		e.u64(uint64(len(x)))
		e.raw(x)
	case []int8:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.u8(uint8(y))
		}
	case []uint16:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.u16(y)
		}
	case []int16:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.u16(uint16(y))
		}
	case []uint32:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.u32(y)
		}
	case []int32:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.u32(uint32(y))
		}
	case []float32:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.u32(math.Float32bits(y))
		}
	case []bool:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.u8(b2u(y))
		}
	case []string:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.str(y)
		}
	case []uint64:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.u64(y)
		}
	case []int64:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.u64(uint64(y))
		}
	case []float64:
		e.u64(uint64(len(x)))
		for _, y := range x {
			e.u64(math.Float64bits(y))
		}
	}
}
