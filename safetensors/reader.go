// Package safetensors reads and writes Hugging Face safetensors files:
// single files and sharded directories (model.safetensors.index.json).
//
// A file is an 8-byte little-endian header length N, N bytes of JSON
// describing each tensor's dtype, shape and data offsets, then the tensor
// data. The reader memory-maps files and checks every header strictly (see
// ParseHeader) before it trusts any size or offset in it. The writer is
// deterministic and lays files out as the Rust implementation does.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/qnnprep/qnnprep/internal/mmapfile"
)

// IndexName is the file name of a sharded model's index.
const IndexName = "model.safetensors.index.json"

// maxIndexSize bounds the index file we are willing to read into memory.
const maxIndexSize = 100_000_000

// useMmap is switched off by tests to exercise the ReadAt path.
var useMmap = true

// Model is an opened safetensors file or sharded directory. Its methods
// may be called concurrently, except Close.
type Model struct {
	Dir      string            // directory of the file(s)
	Tensors  []TensorInfo      // sorted by name
	Metadata map[string]string // __metadata__ of all files merged (first file in name order wins)

	files  map[string]*file // by path (TensorInfo.File)
	closed bool
}

// file is one open safetensors file: mapped, or read with ReadAt.
type file struct {
	path string
	data []byte   // whole file when memory-mapped
	f    *os.File // when not mapped
}

// Open opens a .safetensors file, a directory holding
// model.safetensors.index.json and its shards (or that index file itself),
// or a directory holding model.safetensors (or a single *.safetensors
// file). Shards are named by weight_map only; they may be symlinks (as in
// the Hugging Face cache) but their names must be plain file names.
func Open(path string) (*Model, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if !fi.IsDir() {
		if filepath.Base(path) == IndexName {
			return openSharded(filepath.Dir(path), path)
		}
		return openSingle(filepath.Dir(path), path)
	}
	index := filepath.Join(path, IndexName)
	if _, err := os.Stat(index); err == nil {
		return openSharded(path, index)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	single := filepath.Join(path, "model.safetensors")
	if _, err := os.Stat(single); err == nil {
		return openSingle(path, single)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var found []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".safetensors") && !strings.HasPrefix(n, ".") && !e.IsDir() {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("safetensors: %s: no %s, model.safetensors or other *.safetensors file: %w", path, IndexName, fs.ErrNotExist)
	case 1:
		return openSingle(path, filepath.Join(path, found[0]))
	}
	return nil, fmt.Errorf("safetensors: %s: %d .safetensors files (%s) but no %s to say which to use",
		path, len(found), strings.Join(found, ", "), IndexName)
}

func newModel(dir string) *Model {
	return &Model{Dir: dir, Metadata: map[string]string{}, files: map[string]*file{}}
}

func openSingle(dir, path string) (*Model, error) {
	m := newModel(dir)
	md, ts, err := m.load(path)
	if err != nil {
		m.Close()
		return nil, err
	}
	maps.Copy(m.Metadata, md)
	m.Tensors = ts
	m.finish()
	return m, nil
}

func openSharded(dir, index string) (*Model, error) {
	wm, err := readIndex(index)
	if err != nil {
		return nil, err
	}
	var shards []string
	for _, s := range wm {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	shards = slices.Compact(shards)

	m := newModel(dir)
	fail := func(err error) (*Model, error) { m.Close(); return nil, err }
	where := map[string]string{} // tensor name → shard
	for _, s := range shards {
		p := filepath.Join(dir, s)
		md, ts, err := m.load(p)
		if errors.Is(err, fs.ErrNotExist) {
			return fail(&FormatError{File: index, Err: ErrMissingShard, Msg: fmt.Sprintf("shard %q listed in weight_map does not exist", s), Cause: err})
		}
		if err != nil {
			return fail(err)
		}
		for k, v := range md {
			if _, ok := m.Metadata[k]; !ok {
				m.Metadata[k] = v
			}
		}
		for _, t := range ts {
			if prev, dup := where[t.Name]; dup {
				return fail(&FormatError{File: p, Tensor: t.Name, Err: ErrDuplicate, Msg: fmt.Sprintf("also present in shard %q", prev)})
			}
			where[t.Name] = s
			want, listed := wm[t.Name]
			if !listed {
				return fail(&FormatError{File: index, Tensor: t.Name, Err: ErrIndex, Msg: fmt.Sprintf("present in shard %q but not listed in weight_map", s)})
			}
			if want != s {
				return fail(&FormatError{File: index, Tensor: t.Name, Err: ErrIndex, Msg: fmt.Sprintf("weight_map says shard %q but it is in shard %q", want, s)})
			}
		}
		m.Tensors = append(m.Tensors, ts...)
	}
	names := make([]string, 0, len(wm))
	for n := range wm {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if _, ok := where[n]; !ok {
			return fail(&FormatError{File: index, Tensor: n, Err: ErrIndex, Msg: fmt.Sprintf("listed in weight_map under shard %q, which does not contain it", wm[n])})
		}
	}
	m.finish()
	return m, nil
}

// readIndex reads the weight_map of a sharded model's index and checks
// that every shard is a plain file name; the rest of the index is ignored.
func readIndex(path string) (map[string]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if fi.Size() > maxIndexSize {
		return nil, &FormatError{File: path, Err: ErrIndex, Msg: fmt.Sprintf("index is %d bytes, more than the %d we accept", fi.Size(), maxIndexSize)}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return parseIndex(b, path)
}

// parseIndex is readIndex on the index's bytes b; path names it in errors.
func parseIndex(b []byte, path string) (map[string]string, error) {
	bad := func(err error) error {
		return &FormatError{File: path, Err: ErrIndex, Msg: "invalid index: " + msgOf(err), Cause: err}
	}
	if !utf8.Valid(b) {
		return nil, bad(errors.New("not valid UTF-8"))
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := delim(dec, '{', "a JSON object"); err != nil {
		return nil, bad(err)
	}
	var wm map[string]string
	for dec.More() {
		key, err := stringToken(dec, "a key")
		if err != nil {
			return nil, bad(err)
		}
		if key != "weight_map" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, bad(err)
			}
			continue
		}
		if wm != nil {
			return nil, bad(errors.New("weight_map appears twice"))
		}
		if wm, err = readStringMap(dec); err != nil {
			return nil, bad(errors.New("weight_map: " + msgOf(err)))
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad(errors.New("unexpected data after the JSON object"))
	}
	if len(wm) == 0 {
		return nil, &FormatError{File: path, Err: ErrIndex, Msg: "no tensors: weight_map missing or empty"}
	}
	for name, s := range wm {
		if err := checkShardName(s); err != nil {
			return nil, &FormatError{File: path, Tensor: name, Err: ErrShardPath, Msg: err.Error()}
		}
	}
	return wm, nil
}

// checkShardName accepts only a plain file name, so that an index can
// never make us open a file outside the model directory.
func checkShardName(s string) error {
	switch {
	case s == "":
		return errors.New("empty shard file name")
	case filepath.IsAbs(s) || strings.HasPrefix(s, "/") || strings.HasPrefix(s, `\`):
		return fmt.Errorf("shard %q is an absolute path; expected a file name inside the model directory", s)
	case s == "." || s == ".." || strings.Contains(s, ".."+"/") || strings.Contains(s, `..\`) || strings.HasSuffix(s, "/..") || strings.HasSuffix(s, `\..`):
		return fmt.Errorf("shard %q leaves the model directory; expected a plain file name", s)
	case strings.ContainsAny(s, `/\:`) || strings.ContainsRune(s, 0):
		return fmt.Errorf("shard %q contains a path separator; expected a plain file name", s)
	case !filepath.IsLocal(s):
		return fmt.Errorf("shard %q is not a plain file name", s)
	}
	return nil
}

// load opens, maps and parses one file and registers it with m.
func (m *Model) load(path string) (map[string]string, []TensorInfo, error) {
	if fi, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	} else if !fi.Mode().IsRegular() { // opening a FIFO would block
		return nil, nil, &FormatError{File: path, Err: ErrTooShort, Msg: "not a regular file"}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	size := fi.Size()
	if size < 8 {
		f.Close()
		return nil, nil, &FormatError{File: path, Err: ErrTooShort, Msg: fmt.Sprintf("file is %d bytes, too short for the 8-byte header length", size)}
	}
	fl := &file{path: path, f: f}
	if useMmap {
		if data, err := mmapfile.Map(f, size); err == nil {
			fl.data, fl.f = data, nil
			f.Close()
		}
	}
	m.files[path] = fl // from here on, Close releases it

	var lenBuf [8]byte
	if err := fl.readAt(lenBuf[:], 0); err != nil {
		return nil, nil, err
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, nil, &FormatError{File: path, Err: ErrHeaderTooLarge, Msg: fmt.Sprintf("header length %d exceeds the format's limit of %d", n, MaxHeaderSize)}
	}
	if n > uint64(size-8) {
		return nil, nil, &FormatError{File: path, Err: ErrHeaderLength, Msg: fmt.Sprintf("header length %d but only %d bytes follow the length field", n, size-8)}
	}
	var hdr []byte
	if fl.data != nil {
		hdr = fl.data[8 : 8+n]
	} else {
		hdr = make([]byte, n) // n ≤ MaxHeaderSize and ≤ the file size
		if err := fl.readAt(hdr, 8); err != nil {
			return nil, nil, err
		}
	}
	return ParseHeader(hdr, size-8-int64(n), path)
}

func (fl *file) readAt(dst []byte, off int64) error {
	if fl.data != nil {
		copy(dst, fl.data[off:])
		return nil
	}
	if _, err := fl.f.ReadAt(dst, off); err != nil {
		return fmt.Errorf("safetensors: read %s: %w", fl.path, err)
	}
	return nil
}

func (fl *file) close() error {
	if fl.data != nil {
		err := mmapfile.Unmap(fl.data)
		fl.data = nil
		return err
	}
	if fl.f != nil {
		err := fl.f.Close()
		fl.f = nil
		return err
	}
	return nil
}

// finish sorts the tensors by name, which Tensor searches (a map would
// cost more than the header for files of many small tensors).
func (m *Model) finish() {
	slices.SortFunc(m.Tensors, func(a, b TensorInfo) int { return strings.Compare(a.Name, b.Name) })
}

// Tensor returns the tensor called name.
func (m *Model) Tensor(name string) (*TensorInfo, bool) {
	i, ok := slices.BinarySearchFunc(m.Tensors, name, func(t TensorInfo, name string) int { return strings.Compare(t.Name, name) })
	if !ok {
		return nil, false
	}
	return &m.Tensors[i], true
}

// Data returns the raw little-endian bytes of a tensor. When the file is
// memory-mapped this is a read-only view of the mapping (valid until
// Close); otherwise it is a fresh copy.
func (m *Model) Data(name string) ([]byte, error) {
	t, ok := m.Tensor(name)
	if !ok {
		return nil, &FormatError{File: m.Dir, Tensor: name, Err: ErrNotFound, Msg: "no such tensor"}
	}
	if m.closed {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", t.File, name, os.ErrClosed)
	}
	fl := m.files[t.File]
	if fl.data != nil {
		return fl.data[t.Begin:t.End:t.End], nil
	}
	buf := make([]byte, t.End-t.Begin) // validated against the file size
	if err := fl.readAt(buf, t.Begin); err != nil {
		return nil, err
	}
	return buf, nil
}

// Close unmaps and closes all files. Slices returned by Data must not be
// used afterwards.
func (m *Model) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	var first error
	for _, fl := range m.files {
		if err := fl.close(); err != nil && first == nil {
			first = fmt.Errorf("safetensors: close %s: %w", fl.path, err)
		}
	}
	return first
}
