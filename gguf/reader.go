package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/qnnprep/qnnprep/internal/mmapfile"
)

// File is an open GGUF file: its header, metadata and tensor table. The
// tensor bytes stay in the file and are fetched with Data.
type File struct {
	Path       string
	Version    uint32
	Alignment  int64
	DataOffset int64 // absolute offset of the data section
	Metadata   Metadata
	Tensors    []TensorInfo // file order

	r      io.ReaderAt
	size   int64
	mapped []byte // the whole file when memory-mapped
	file   *os.File
	closed bool
	byName map[string]int
}

// Open opens and validates a GGUF file. The file is memory-mapped when the
// system allows it, so Data returns slices of the mapping without copying;
// otherwise Data reads with ReadAt. Call Close when done.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if m, err := mmapfile.Map(fd, size); err == nil {
		fd.Close()
		f, err := Parse(bytes.NewReader(m), size, path)
		if err != nil {
			mmapfile.Unmap(m)
			return nil, err
		}
		f.mapped = m
		return f, nil
	}
	f, err := Parse(fd, size, path)
	if err != nil {
		fd.Close()
		return nil, err
	}
	f.file = fd
	return f, nil
}

// Close releases the mapping or the file. Slices returned by Data must not
// be used afterwards.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	var err error
	if f.mapped != nil {
		err = mmapfile.Unmap(f.mapped)
		f.mapped = nil
	}
	if f.file != nil {
		err = f.file.Close()
	}
	return err
}

// Tensor returns the tensor named name. It is safe for concurrent use.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	if i, ok := f.byName[name]; ok && i < len(f.Tensors) && f.Tensors[i].Name == name {
		return &f.Tensors[i], true
	}
	for i := range f.Tensors { // Tensors edited after Parse
		if f.Tensors[i].Name == name {
			return &f.Tensors[i], true
		}
	}
	return nil, false
}

// Data returns the bytes of tensor t (t.Bytes() long, without padding).
// For a memory-mapped file the slice aliases the mapping and is read-only.
func (f *File) Data(t *TensorInfo) ([]byte, error) {
	if f.closed {
		return nil, fmt.Errorf("gguf: %s: tensor %q: file is closed", f.Path, t.Name)
	}
	n := t.Bytes()
	start := f.DataOffset + int64(t.Offset)
	if t.Offset > uint64(f.size) || start > f.size || n > f.size-start {
		return nil, &FormatError{File: f.Path, Tensor: t.Name, Offset: -1,
			Msg: fmt.Sprintf("data at offset %d (%d bytes) is past the end of the file (%d bytes)", t.Offset, n, f.size)}
	}
	if f.mapped != nil {
		return f.mapped[start : start+n : start+n], nil
	}
	buf := make([]byte, n)
	if m, err := f.r.ReadAt(buf, start); m < len(buf) {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", f.Path, t.Name, err)
	}
	return buf, nil
}

// Parse reads and validates a GGUF file of size bytes from r; name is used
// in error messages. Data then reads tensor bytes with r.ReadAt.
func Parse(r io.ReaderAt, size int64, name string) (*File, error) {
	d := &decoder{
		br:   bufio.NewReaderSize(io.NewSectionReader(r, 0, size), int(min(64<<10, max(size, 16)))),
		size: size,
		name: name,
	}
	f := &File{Path: name, r: r, size: size}
	if err := d.header(f); err != nil {
		return nil, err
	}
	return f, nil
}

// decoder reads the header sequentially and knows how many bytes are left,
// so every length can be checked before it is used.
type decoder struct {
	br     *bufio.Reader
	off    int64 // offset of the next byte
	size   int64
	name   string
	key    string // context for errors
	tensor string
}

func (d *decoder) errf(format string, args ...any) error {
	return &FormatError{File: d.name, Key: d.key, Tensor: d.tensor, Offset: d.off, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) left() int64 { return d.size - d.off }

// next returns the next n bytes, valid until the next call. what names
// the field for the truncation error.
func (d *decoder) next(n int, what string) ([]byte, error) {
	if int64(n) > d.left() {
		return nil, d.errf("file truncated: %s needs %d bytes, %d left", what, n, d.left())
	}
	var b []byte
	var err error
	if n <= d.br.Size() {
		b, err = d.br.Peek(n)
		if err == nil {
			d.br.Discard(n)
		}
	} else {
		b = make([]byte, n)
		_, err = io.ReadFull(d.br, b)
	}
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, d.errf("file truncated: %s needs %d bytes", what, n)
		}
		return nil, d.errf("reading %s: %v", what, err)
	}
	d.off += int64(n)
	return b, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	b, err := d.next(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	b, err := d.next(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a length-prefixed string of at most limit bytes. The field is
// named what, or "what #idx" when idx >= 0; the name is only built for an
// error, since vocabularies hold hundreds of thousands of strings.
func (d *decoder) str(what string, idx int, limit uint64) (string, error) {
	name := func() string {
		if idx >= 0 {
			return fmt.Sprintf("%s #%d", what, idx)
		}
		return what
	}
	if d.left() < 8 {
		_, err := d.next(8, name()+" length")
		return "", err
	}
	b, err := d.next(8, "")
	if err != nil {
		return "", err
	}
	n := binary.LittleEndian.Uint64(b)
	if n > limit {
		return "", d.errf("%s is %d bytes long, at most %d allowed", name(), n, limit)
	}
	if n > uint64(d.left()) {
		return "", d.errf("%s is %d bytes long, but only %d bytes are left in the file (truncated or corrupt)", name(), n, d.left())
	}
	if b, err = d.next(int(n), ""); err != nil {
		return "", d.errf("reading %s: %v", name(), err)
	}
	return string(b), nil
}

func (d *decoder) header(f *File) error {
	magic, err := d.next(4, "magic")
	if err != nil {
		return err
	}
	if string(magic) != Magic {
		d.off = 0
		return d.errf("bad magic %q, expected %q: not a GGUF file", magic, Magic)
	}
	v, err := d.u32("version")
	if err != nil {
		return err
	}
	switch {
	case v == 0:
		return d.errf("version 0 is invalid, expected 2 or 3")
	case v&0xFFFF == 0:
		return d.errf("version field is %#08x: a byte-swapped (big-endian) GGUF file, which is not supported", v)
	case v == 1:
		return d.errf("GGUF v1 is not supported, expected version 2 or 3")
	case v > Version:
		return d.errf("version %d is newer than the supported versions 2 and 3", v)
	}
	f.Version = v

	nt, err := d.u64("tensor count")
	if err != nil {
		return err
	}
	nkv, err := d.u64("metadata count")
	if err != nil {
		return err
	}
	// ggml reads both counts as int64; negative is invalid. Every entry
	// takes bytes, so a count above the bytes left is impossible. (Storage
	// grows with the entries actually read, never from these counts.)
	if int64(nt) < 0 || nt > uint64(d.left()) {
		return d.errf("tensor count %d is impossible with %d bytes left in the file (truncated or corrupt)", int64(nt), d.left())
	}
	if int64(nkv) < 0 || nkv > uint64(d.left()) {
		return d.errf("metadata count %d is impossible with %d bytes left in the file (truncated or corrupt)", int64(nkv), d.left())
	}

	if err := d.metadata(f, int(nkv)); err != nil {
		return err
	}
	if err := d.alignment(f); err != nil {
		return err
	}
	if err := d.tensorInfos(f, int(nt)); err != nil {
		return err
	}
	return d.layout(f)
}

func (d *decoder) metadata(f *File, n int) error {
	f.Metadata = make(Metadata, 0, min(n, 1024))
	seen := make(map[string]bool, min(n, 1024))
	for i := range n {
		d.key = ""
		key, err := d.str("key", i, maxStringLength)
		if err != nil {
			return err
		}
		if key == "" {
			return d.errf("key #%d is empty", i)
		}
		d.key = key
		if seen[key] {
			return d.errf("duplicate key")
		}
		seen[key] = true
		t, err := d.u32("value type")
		if err != nil {
			return err
		}
		v, err := d.value(ValueType(t))
		if err != nil {
			return err
		}
		f.Metadata = append(f.Metadata, KV{key, v})
	}
	d.key = ""
	return nil
}

func (d *decoder) value(t ValueType) (any, error) {
	switch t {
	case String:
		return d.str("string value", -1, maxStringLength)
	case Array:
		return d.array()
	}
	if t.size() == 0 {
		return nil, d.errf("invalid value type %d, expected 0 to 12", uint32(t))
	}
	b, err := d.next(t.size(), t.String()+" value")
	if err != nil {
		return nil, err
	}
	return scalar(t, b), nil
}

// scalar decodes one little-endian value of fixed-size type t.
func scalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case Uint8:
		return b[0]
	case Int8:
		return int8(b[0])
	case Bool:
		return b[0] != 0 // as ggml: any non-zero byte is true
	case Uint16:
		return le.Uint16(b)
	case Int16:
		return int16(le.Uint16(b))
	case Uint32:
		return le.Uint32(b)
	case Int32:
		return int32(le.Uint32(b))
	case Float32:
		return math.Float32frombits(le.Uint32(b))
	case Uint64:
		return le.Uint64(b)
	case Int64:
		return int64(le.Uint64(b))
	case Float64:
		return math.Float64frombits(le.Uint64(b))
	}
	panic("unreachable")
}

func (d *decoder) array() (any, error) {
	et, err := d.u32("array element type")
	if err != nil {
		return nil, err
	}
	t := ValueType(et)
	if t == Array {
		return nil, d.errf("nested arrays are not supported (ggml rejects them)")
	}
	if t != String && t.size() == 0 {
		return nil, d.errf("invalid array element type %d, expected 0 to 12 except 9", et)
	}
	n, err := d.u64("array length")
	if err != nil {
		return nil, err
	}
	if n > maxArrayElements {
		return nil, d.errf("array of %d elements, at most %d allowed", n, maxArrayElements)
	}
	elem := t.size()
	if t == String {
		elem = 8 // each string has at least its length
	}
	if n > uint64(d.left()/int64(elem)) {
		return nil, d.errf("array of %d %s elements needs at least %d bytes, but only %d are left in the file (truncated or corrupt)", n, t, n*uint64(elem), d.left())
	}
	count := int(n)
	if t == String {
		// A string header is 8 bytes but a Go string 16: grow as strings
		// are read rather than trusting the count for the whole slice.
		out := make([]string, 0, min(count, 1<<16))
		for i := range count {
			s, err := d.str("array string", i, maxStringLength)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	switch t {
	case Uint8:
		return readArray(d, count, t, func(b []byte) uint8 { return b[0] })
	case Int8:
		return readArray(d, count, t, func(b []byte) int8 { return int8(b[0]) })
	case Bool:
		return readArray(d, count, t, func(b []byte) bool { return b[0] != 0 })
	case Uint16:
		return readArray(d, count, t, binary.LittleEndian.Uint16)
	case Int16:
		return readArray(d, count, t, func(b []byte) int16 { return int16(binary.LittleEndian.Uint16(b)) })
	case Uint32:
		return readArray(d, count, t, binary.LittleEndian.Uint32)
	case Int32:
		return readArray(d, count, t, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
	case Float32:
		return readArray(d, count, t, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })
	case Uint64:
		return readArray(d, count, t, binary.LittleEndian.Uint64)
	case Int64:
		return readArray(d, count, t, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
	default: // Float64
		return readArray(d, count, t, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })
	}
}

// readArray decodes n fixed-size elements in chunks that fit the buffer.
// The caller has checked that n elements fit in the bytes left.
func readArray[T any](d *decoder, n int, t ValueType, conv func([]byte) T) ([]T, error) {
	size := t.size()
	out := make([]T, n)
	per := d.br.Size() / size
	for i := 0; i < n; {
		k := min(per, n-i)
		b, err := d.next(k*size, t.String()+" array")
		if err != nil {
			return nil, err
		}
		for j := range k {
			out[i+j] = conv(b[j*size:])
		}
		i += k
	}
	return out, nil
}

func (d *decoder) alignment(f *File) error {
	f.Alignment = DefaultAlignment
	v, ok := f.Metadata.Get(AlignmentKey)
	if !ok {
		return nil
	}
	d.key = AlignmentKey
	defer func() { d.key = "" }()
	a, ok := v.(uint32)
	if !ok {
		t, e, _ := TypeOf(v)
		if t == Array {
			return d.errf("must be of type UINT32, not an array of %s", e)
		}
		return d.errf("must be of type UINT32, not %s", t)
	}
	if !isPowerOfTwo(uint64(a)) {
		return d.errf("alignment %d is not a non-zero power of two", a)
	}
	f.Alignment = int64(a)
	return nil
}

func (d *decoder) tensorInfos(f *File, n int) error {
	f.Tensors = make([]TensorInfo, 0, min(n, 4096))
	f.byName = make(map[string]int, min(n, 4096))
	for i := range n {
		d.tensor = ""
		ln, err := d.u64(fmt.Sprintf("tensor #%d name length", i))
		if err != nil {
			return err
		}
		if ln > MaxNameLength {
			return d.errf("tensor #%d name is %d bytes long, at most %d allowed", i, ln, MaxNameLength)
		}
		b, err := d.next(int(ln), fmt.Sprintf("tensor #%d name", i))
		if err != nil {
			return err
		}
		name := string(b)
		d.tensor = name
		if _, dup := f.byName[name]; dup {
			return d.errf("duplicate tensor name")
		}
		if strings.IndexByte(name, 0) >= 0 {
			// ggml would cut the name at the NUL; refuse rather than guess.
			return d.errf("tensor name contains a NUL byte")
		}
		f.byName[name] = i
		nd, err := d.u32("dimension count")
		if err != nil {
			return err
		}
		if nd > MaxDims {
			return d.errf("%d dimensions, at most %d allowed", nd, MaxDims)
		}
		dims := make([]int64, nd)
		for j := range dims {
			v, err := d.u64(fmt.Sprintf("dimension %d", j))
			if err != nil {
				return err
			}
			dims[j] = int64(v)
		}
		typ, err := d.u32("type")
		if err != nil {
			return err
		}
		if _, msg := checkShape(dims, Type(typ)); msg != "" {
			return d.errf("%s", msg)
		}
		off, err := d.u64("data offset")
		if err != nil {
			return err
		}
		f.Tensors = append(f.Tensors, TensorInfo{Name: name, Dims: dims, Type: Type(typ), Offset: off})
	}
	d.tensor = ""
	return nil
}

// layout checks what ggml checks after the tensor infos: the data section
// starts at the next multiple of the alignment, each tensor sits at the
// running sum of the padded sizes before it, and (our addition) every
// tensor lies inside the file.
func (d *decoder) layout(f *File) error {
	f.DataOffset = d.off
	if len(f.Tensors) == 0 {
		return nil // ggml does not pad when there are no tensors
	}
	f.DataOffset = pad(d.off, f.Alignment)
	if f.DataOffset > f.size {
		return d.errf("file truncated: the data section starts at byte %d after padding, but the file has %d bytes", f.DataOffset, f.size)
	}
	dataSize := f.size - f.DataOffset
	var want int64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		e := &FormatError{File: d.name, Tensor: t.Name, Offset: -1}
		if t.Offset != uint64(want) {
			if i > 0 && fitsNext(f, i, dataSize) {
				// t sits where its successor (or the file's end) says,
				// so the size of the tensor before it is what is wrong:
				// a changed type or dimension, not a moved offset.
				p := &f.Tensors[i-1]
				e.Tensor = p.Name
				e.Msg = fmt.Sprintf("shape %v of type %s makes %d bytes (%d padded), but the next tensor %q starts %d bytes after it (wrong shape or type?)",
					p.Dims, p.Type, p.Bytes(), pad(p.Bytes(), f.Alignment), t.Name, t.Offset-p.Offset)
				return e
			}
			e.Msg = fmt.Sprintf("offset %d, expected %d", t.Offset, want)
			return e
		}
		n := t.Bytes()
		if n > dataSize-want {
			e.Msg = fmt.Sprintf("data [%d, %d) of the data section is past its end (size %d; file truncated?)", want, want+n, dataSize)
			return e
		}
		want += pad(n, f.Alignment) // cannot overflow: want+n <= file size
	}
	return nil
}

// fitsNext reports whether tensor i's recorded offset agrees with what
// follows it: it is aligned, lies after tensor i-1, and its data ends
// where tensor i+1 starts (or, for the last tensor, at the end of the
// data section, give or take padding).
func fitsNext(f *File, i int, dataSize int64) bool {
	t, prev := &f.Tensors[i], &f.Tensors[i-1]
	if t.Offset%uint64(f.Alignment) != 0 || t.Offset <= prev.Offset || t.Offset > uint64(dataSize) {
		return false
	}
	end := int64(t.Offset) + t.Bytes()
	if i+1 < len(f.Tensors) {
		return f.Tensors[i+1].Offset == uint64(pad(end, f.Alignment))
	}
	return end <= dataSize && dataSize-end < f.Alignment
}
