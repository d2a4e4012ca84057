package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writerFor builds a Writer that copies f.
func writerFor(t testing.TB, f *File) *Writer {
	w := &Writer{Metadata: f.Metadata}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		w.Tensors = append(w.Tensors, WriterTensor{ti.Name, ti.Dims, ti.Type, Bytes(data)})
	}
	return w
}

// TestRoundTripFixtures reads every fixture GGUF (v3), writes it back and
// reads that again. Both llama.cpp's C++ writer (stories260K) and gguf-py's
// writer (the vocab files, no tensors, no final padding) lay files out as
// ggml does, so the written bytes equal the original ones.
func TestRoundTripFixtures(t *testing.T) {
	for _, p := range fixtureGGUFs(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Version != Version {
				// llama.cpp's models/ keeps a few v2 files (aquila).
				t.Skipf("GGUF v%d: the writer writes only v%d", f.Version, Version)
			}
			var buf bytes.Buffer
			n, err := writerFor(t, f).WriteTo(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(buf.Len()) {
				t.Errorf("WriteTo returned %d, wrote %d", n, buf.Len())
			}
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), orig) {
				i := 0
				for i < len(orig) && i < buf.Len() && orig[i] == buf.Bytes()[i] {
					i++
				}
				t.Errorf("written file differs from the original at byte %d (sizes %d, %d)", i, buf.Len(), len(orig))
			}
			g, err := parseBytes(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.Metadata, g.Metadata) {
				t.Error("metadata differs after the round trip")
			}
			if g.DataOffset != f.DataOffset || len(g.Tensors) != len(f.Tensors) {
				t.Fatalf("data offset %d/%d, %d/%d tensors", g.DataOffset, f.DataOffset, len(g.Tensors), len(f.Tensors))
			}
			for i := range f.Tensors {
				a, _ := f.Data(&f.Tensors[i])
				b, _ := g.Data(&g.Tensors[i])
				if !reflect.DeepEqual(f.Tensors[i], g.Tensors[i]) || !bytes.Equal(a, b) {
					t.Errorf("tensor %q differs", f.Tensors[i].Name)
				}
			}
		})
	}
}

// TestWriterLayout writes a file with mixed types, including Q1_0 and
// Q2_0, and compares it byte for byte with the layout ggml's rules give,
// built field by field by the independent raw encoder: offsets are the
// running sums of sizes padded to the alignment, the data section starts
// at the padded end of the infos, every tensor (the last one too) is
// zero-padded.
func TestWriterLayout(t *testing.T) {
	type spec struct {
		name string
		dims []int64
		typ  Type
		size int // by the type table: blocks × bytes per block
	}
	specs := []spec{
		{"blk.0.attn_q.weight", []int64{256, 3}, Q1_0, 2 * 3 * 18},
		{"output.weight", []int64{128, 5}, Q2_0, 2 * 5 * 18},
		{"norm", []int64{7}, F32, 28},
		{"scalar", []int64{1}, F16, 2},
		{"q8", []int64{64, 2}, Q8_0, 2 * 2 * 34},
		{"k", []int64{256, 1, 1, 2}, Q4_K, 2 * 144},
		{"bf", []int64{3, 1, 1}, BF16, 6},
		{"empty", []int64{0, 4}, F32, 0},
	}
	for _, align := range []int64{32, 64, 8} {
		w := &Writer{Alignment: align, Metadata: Metadata{
			{"general.architecture", "llama"},
			{"general.quantization_version", uint32(2)},
			{"qnnprep.flags", []bool{true, false}},
		}}
		raw := rawFile{magic: "GGUF", version: 3, align: align, kvs: []rawKV{
			{"general.architecture", vStr("llama")},
			{"general.quantization_version", vU32(2)},
			{"qnnprep.flags", vArr(7, 2, []byte{1, 0})},
		}}
		if align != 32 {
			raw.kvs = append(raw.kvs, rawKV{"general.alignment", vU32(uint32(align))})
		}
		off := 0
		for i, s := range specs {
			data := make([]byte, s.size)
			for j := range data {
				data[j] = byte(i + j + 1)
			}
			w.Tensors = append(w.Tensors, WriterTensor{s.name, s.dims, s.typ, Bytes(data)})
			raw.tensors = append(raw.tensors, rawTensor{s.name, s.dims, uint32(s.typ), uint64(off)})
			raw.data = append(raw.data, data...)
			for len(raw.data)%int(align) != 0 {
				raw.data = append(raw.data, 0)
			}
			off = len(raw.data)
		}
		var got bytes.Buffer
		if _, err := w.WriteTo(&got); err != nil {
			t.Fatal(err)
		}
		want := raw.bytes()
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("alignment %d: written %d bytes differ from the expected %d", align, got.Len(), len(want))
		}
		if got.Len()%int(align) != 0 {
			t.Errorf("alignment %d: file size %d is not padded", align, got.Len())
		}
		f, err := parseBytes(got.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if f.Alignment != align || f.DataOffset%align != 0 {
			t.Errorf("read back alignment %d, data offset %d", f.Alignment, f.DataOffset)
		}
		// Same input, same bytes.
		var again bytes.Buffer
		w.WriteTo(&again)
		if !bytes.Equal(got.Bytes(), again.Bytes()) {
			t.Error("second write differs")
		}
	}
}

// TestWriterNoTensors: no padding at all after the metadata, as ggml and
// gguf-py write vocab-only files.
func TestWriterNoTensors(t *testing.T) {
	w := &Writer{Metadata: Metadata{{"general.architecture", "x"}}}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	want := rawFile{magic: "GGUF", version: 3, kvs: []rawKV{{"general.architecture", vStr("x")}}}.bytes()
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("got %d bytes, want %d", buf.Len(), len(want))
	}
}

func TestWriterAllValueTypes(t *testing.T) {
	md := Metadata{
		{"u8", uint8(1)}, {"i8", int8(-1)}, {"u16", uint16(2)}, {"i16", int16(-2)},
		{"u32", uint32(3)}, {"i32", int32(-3)}, {"f32", float32(0.5)}, {"b", true},
		{"s", "str"}, {"u64", uint64(1 << 50)}, {"i64", int64(-1 << 50)}, {"f64", 0.25},
		{"au8", []uint8{1}}, {"ai8", []int8{-1}}, {"au16", []uint16{2}}, {"ai16", []int16{-2}},
		{"au32", []uint32{3}}, {"ai32", []int32{-3}}, {"af32", []float32{0.5}}, {"ab", []bool{true, false}},
		{"as", []string{"a", ""}}, {"au64", []uint64{4}}, {"ai64", []int64{-4}}, {"af64", []float64{0.125}},
		{"empty", []float32{}},
	}
	var buf bytes.Buffer
	if _, err := (&Writer{Metadata: md}).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := parseBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Metadata, md) {
		t.Errorf("got %v\nwant %v", f.Metadata, md)
	}
}

// shortData writes a fixed number of bytes whatever the tensor needs.
type shortData int

func (s shortData) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(make([]byte, s))
	return int64(n), err
}

func TestWriterErrors(t *testing.T) {
	q := []int64{32}
	cases := []struct {
		name string
		w    Writer
		want string
	}{
		{"short tensor", Writer{Tensors: []WriterTensor{{"t", q, Q8_0, shortData(33)}}}, `tensor "t": data wrote 33 bytes, expected 34`},
		{"long tensor", Writer{Tensors: []WriterTensor{{"t", q, Q8_0, shortData(35)}}}, `tensor "t": data wrote 35 bytes, expected 34`},
		{"no data", Writer{Tensors: []WriterTensor{{"t", q, Q8_0, nil}}}, `tensor "t": no data`},
		{"duplicate tensor", Writer{Tensors: []WriterTensor{{"t", q, F32, shortData(128)}, {"t", q, F32, shortData(128)}}}, `tensor "t": duplicate`},
		{"long name", Writer{Tensors: []WriterTensor{{strings.Repeat("x", 64), q, F32, shortData(128)}}}, "64 bytes long, at most 63"},
		{"partial block", Writer{Tensors: []WriterTensor{{"t", []int64{16}, Q1_0, shortData(0)}}}, "not a multiple of Q1_0's block size 128"},
		{"bad type", Writer{Tensors: []WriterTensor{{"t", q, Type(5), shortData(0)}}}, "invalid ggml type 5"},
		{"5 dims", Writer{Tensors: []WriterTensor{{"t", []int64{1, 1, 1, 1, 1}, F32, shortData(4)}}}, "5 dimensions"},
		{"duplicate key", Writer{Metadata: Metadata{{"a", "x"}, {"a", "y"}}}, `key "a": duplicate key`},
		{"empty key", Writer{Metadata: Metadata{{"", "x"}}}, "empty metadata key"},
		{"bad value", Writer{Metadata: Metadata{{"a", 3}}}, `key "a": value of Go type int cannot be stored`},
		{"nested array", Writer{Metadata: Metadata{{"a", [][]int32{{1}}}}}, `key "a": value of Go type [][]int32`},
		{"alignment type", Writer{Metadata: Metadata{{"general.alignment", uint64(32)}}}, "must be a uint32"},
		{"alignment value", Writer{Metadata: Metadata{{"general.alignment", uint32(24)}}}, "alignment 24 is not"},
		{"alignment conflict", Writer{Alignment: 64, Metadata: Metadata{{"general.alignment", uint32(32)}}}, "Writer.Alignment is 64"},
		{"alignment field", Writer{Alignment: 12}, "alignment 12 is not a power of two"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.w.WriteTo(io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.gguf")
	w := &Writer{Metadata: Metadata{{"general.architecture", "llama"}},
		Tensors: []WriterTensor{{"t", []int64{2}, F32, Bytes(make([]byte, 8))}}}
	if err := WriteFile(p, w); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()

	bad := filepath.Join(dir, "bad.gguf")
	w.Tensors[0].Data = shortData(3)
	err = WriteFile(bad, w)
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "bad.gguf") {
		t.Errorf("error %v does not name the file", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 || entries[0].Name() != ".qnnprep-outputs" || entries[1].Name() != "m.gguf" {
		t.Errorf("directory holds %v after a failed write, want only m.gguf and the marker listing it", entries)
	}
}
