package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// WriterTensor is one tensor to write. Data must write exactly the
// tensor's byte size (numel × bits / 8); it may be nil for an empty tensor.
type WriterTensor struct {
	Name  string
	Dtype Dtype
	Shape []int64
	Data  io.WriterTo
}

// Writer describes a safetensors file to write.
//
// The output is deterministic and laid out as the Rust writer does it:
// tensors ordered by descending dtype alignment (the Rust enum order: U64,
// I64, F64, C64, F32, U32, I32, BF16, F16, U16, I16, F8_*, I8, U8, F6_*,
// F4, BOOL), then by name (bytewise); the header is compact JSON with
// __metadata__ first (only when non-empty, keys sorted), then the tensors
// in data order, padded with spaces to a multiple of 8 bytes.
type Writer struct {
	Metadata map[string]string
	Tensors  []WriterTensor
}

// Bytes returns an io.WriterTo that writes b, for WriterTensor.Data. Unlike
// a bytes.Reader it can be written any number of times.
func Bytes(b []byte) io.WriterTo { return byteSlice(b) }

type byteSlice []byte

func (b byteSlice) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}

// planned is a tensor with its place in the data section.
type planned struct {
	*WriterTensor
	begin, end int64
}

// plan validates w and returns the header and the tensors in data order.
func (w *Writer) plan() ([]byte, []planned, error) {
	ts := make([]planned, len(w.Tensors))
	seen := make(map[string]bool, len(w.Tensors))
	for i := range w.Tensors {
		t := &w.Tensors[i]
		switch {
		case t.Name == "" || t.Name == "__metadata__" || !utf8.ValidString(t.Name):
			return nil, nil, fmt.Errorf("safetensors: write: invalid tensor name %q", t.Name)
		case seen[t.Name]:
			return nil, nil, fmt.Errorf("safetensors: write: tensor %q: %w", t.Name, ErrDuplicate)
		}
		seen[t.Name] = true
		n, err := byteSize(t.Dtype, t.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: write: tensor %q: %w", t.Name, err)
		}
		if t.Data == nil && n != 0 {
			return nil, nil, fmt.Errorf("safetensors: write: tensor %q: no data for %d bytes", t.Name, n)
		}
		ts[i] = planned{WriterTensor: t, end: n}
	}
	slices.SortFunc(ts, func(a, b planned) int {
		if ra, rb := a.Dtype.rank(), b.Dtype.rank(); ra != rb {
			return rb - ra
		}
		return strings.Compare(a.Name, b.Name)
	})
	var off int64
	for i := range ts {
		n := ts[i].end
		if off > maxInt64-n {
			return nil, nil, errors.New("safetensors: write: total data size overflows int64")
		}
		ts[i].begin, ts[i].end = off, off+n
		off += n
	}

	var h []byte
	h = append(h, '{')
	if len(w.Metadata) > 0 {
		keys := make([]string, 0, len(w.Metadata))
		for k, v := range w.Metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, nil, fmt.Errorf("safetensors: write: __metadata__ entry %q is not valid UTF-8", k)
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		h = append(h, `"__metadata__":{`...)
		for i, k := range keys {
			if i > 0 {
				h = append(h, ',')
			}
			h = appendString(h, k)
			h = append(h, ':')
			h = appendString(h, w.Metadata[k])
		}
		h = append(h, '}')
	}
	for i, t := range ts {
		if i > 0 || len(w.Metadata) > 0 {
			h = append(h, ',')
		}
		h = appendString(h, t.Name)
		h = append(h, `:{"dtype":`...)
		h = appendString(h, string(t.Dtype))
		h = append(h, `,"shape":[`...)
		for j, s := range t.Shape {
			if j > 0 {
				h = append(h, ',')
			}
			h = strconv.AppendInt(h, s, 10)
		}
		h = append(h, `],"data_offsets":[`...)
		h = strconv.AppendInt(h, t.begin, 10)
		h = append(h, ',')
		h = strconv.AppendInt(h, t.end, 10)
		h = append(h, "]}"...)
	}
	h = append(h, '}')
	for len(h)%8 != 0 { // the data section starts 8-aligned
		h = append(h, ' ')
	}
	if len(h) > MaxHeaderSize {
		return nil, nil, fmt.Errorf("safetensors: write: header would be %d bytes: %w (limit %d)", len(h), ErrHeaderTooLarge, MaxHeaderSize)
	}
	return h, ts, nil
}

// appendString appends s as a JSON string escaped as serde_json does it:
// quote, backslash and control characters only; UTF-8 is kept as is.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// WriteTo writes the file to out, streaming each tensor's data. It fails
// if a tensor writes more or fewer bytes than its shape and dtype imply.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	h, ts, err := w.plan()
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: out}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(h)))
	cw.Write(lenBuf[:])
	cw.Write(h)
	if cw.err != nil {
		return cw.n, fmt.Errorf("safetensors: write header: %w", cw.err)
	}
	for _, t := range ts {
		size := t.end - t.begin
		if t.Data == nil {
			continue // size 0, checked by plan
		}
		ew := &exactWriter{w: cw, left: size}
		if _, err := t.Data.WriteTo(ew); err != nil {
			return cw.n, fmt.Errorf("safetensors: write tensor %q: %w", t.Name, err)
		}
		if ew.left != 0 {
			return cw.n, fmt.Errorf("safetensors: write tensor %q: data wrote %d bytes, expected %d", t.Name, size-ew.left, size)
		}
	}
	return cw.n, nil
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// exactWriter refuses writes beyond the tensor's size.
type exactWriter struct {
	w    io.Writer
	left int64
}

func (e *exactWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > e.left {
		return 0, fmt.Errorf("data is longer than the %d bytes left for the tensor", e.left)
	}
	n, err := e.w.Write(p)
	e.left -= int64(n)
	return n, err
}

// WriteFile writes w to path atomically (temporary name, then rename).
func WriteFile(path string, w *Writer) error {
	if _, _, err := w.plan(); err != nil { // fail before creating anything
		return err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer f.Abort()
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err := w.WriteTo(bw); err != nil {
		return fmt.Errorf("%w (writing %s)", err, path)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// ShardName returns the file name of shard i (0-based) of n, as Hugging
// Face names them: model-00001-of-00003.safetensors.
func ShardName(i, n int) string {
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
}

// WriteSharded writes w as n shard files plus model.safetensors.index.json
// in dir (created if needed), each file atomically; the index is written
// last. Tensors are sorted by name and split into n runs of nearly equal
// count, so 1 ≤ n ≤ len(w.Tensors). Every shard carries w.Metadata. The
// index's metadata.total_size is the sum of the tensors' byte sizes, and
// it is formatted as Python's json.dumps(indent=2, sort_keys=True).
func WriteSharded(dir string, w *Writer, n int) error {
	if n < 1 || n > len(w.Tensors) || n > 99999 {
		return fmt.Errorf("safetensors: write %s: cannot split %d tensors into %d shards", dir, len(w.Tensors), n)
	}
	_, ts, err := w.plan()
	if err != nil {
		return err
	}
	var total int64
	for _, t := range ts {
		total += t.end - t.begin
	}
	sorted := slices.Clone(w.Tensors)
	slices.SortFunc(sorted, func(a, b WriterTensor) int { return strings.Compare(a.Name, b.Name) })
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	weightMap := make(map[string]string, len(sorted))
	for i := range n {
		part := sorted[i*len(sorted)/n : (i+1)*len(sorted)/n]
		name := ShardName(i, n)
		if err := WriteFile(filepath.Join(dir, name), &Writer{Metadata: w.Metadata, Tensors: part}); err != nil {
			return err
		}
		for _, t := range part {
			weightMap[t.Name] = name
		}
	}
	var idx bytes.Buffer
	enc := json.NewEncoder(&idx)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err = enc.Encode(struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": total}, weightMap})
	if err != nil {
		return fmt.Errorf("safetensors: write index: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, IndexName), idx.Bytes()); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}
