package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fileBytes builds a safetensors file by hand: length, header, data.
func fileBytes(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, data...)
}

func writeBytes(t *testing.T, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

// The example file of the Rust crate's documentation (tensor.rs,
// SafeTensors::deserialize): a 2×2 I32 tensor. The Rust writer pads its
// 60-byte header to 64 bytes.
func TestWriteRustDocExample(t *testing.T) {
	data := make([]byte, 16)
	got := writeBytes(t, &Writer{Tensors: []WriterTensor{{Name: "test", Dtype: I32, Shape: []int64{2, 2}, Data: Bytes(data)}}})
	want := fileBytes(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}    `, data)
	if !bytes.Equal(got, want) {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	// The unpadded original must read too.
	p := filepath.Join(t.TempDir(), "doc.safetensors")
	os.WriteFile(p, fileBytes(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`, data), 0o644)
	m, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ti, ok := m.Tensor("test")
	if !ok || ti.Begin != 8+60 || ti.End != 8+60+16 || ti.Dtype != I32 {
		t.Fatalf("got %+v", ti)
	}
}

// The header order follows the Rust writer: descending dtype (enum order),
// then name; __metadata__ first with sorted keys. The expected header is
// written out by hand from that rule.
func TestWriteLayout(t *testing.T) {
	w := &Writer{
		Metadata: map[string]string{"z": "last", "format": "pt", "q\"\n": "é<>&"},
		Tensors: []WriterTensor{
			{Name: "c", Dtype: U8, Shape: []int64{3}, Data: Bytes([]byte{1, 2, 3})},
			{Name: "b", Dtype: F16, Shape: []int64{2}, Data: Bytes([]byte{4, 5, 6, 7})},
			{Name: "z", Dtype: F32, Shape: []int64{}, Data: Bytes([]byte{8, 9, 10, 11})},
			{Name: "a", Dtype: F32, Shape: []int64{1}, Data: Bytes([]byte{12, 13, 14, 15})},
			{Name: "e", Dtype: F32, Shape: []int64{0, 5}},
			{Name: "d", Dtype: U64, Shape: []int64{1}, Data: Bytes([]byte{16, 17, 18, 19, 20, 21, 22, 23})},
		},
	}
	hdr := `{"__metadata__":{"format":"pt","q\"\n":"é<>&","z":"last"},` +
		`"d":{"dtype":"U64","shape":[1],"data_offsets":[0,8]},` +
		`"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},` +
		`"e":{"dtype":"F32","shape":[0,5],"data_offsets":[12,12]},` +
		`"z":{"dtype":"F32","shape":[],"data_offsets":[12,16]},` +
		`"b":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},` +
		`"c":{"dtype":"U8","shape":[3],"data_offsets":[20,23]}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	want := fileBytes(hdr, []byte{16, 17, 18, 19, 20, 21, 22, 23, 12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 1, 2, 3})
	got := writeBytes(t, w)
	if !bytes.Equal(got, want) {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	// The header is JSON that a standard decoder agrees with.
	var v map[string]any
	if err := json.Unmarshal(got[8:8+len(hdr)], &v); err != nil {
		t.Fatal(err)
	}
	if md := v["__metadata__"].(map[string]any); md["q\"\n"] != "é<>&" {
		t.Fatalf("metadata decoded as %v", md)
	}
}

// Same input, in any tensor order, gives byte-identical output.
func TestWriteDeterministic(t *testing.T) {
	mk := func(rev bool) *Writer {
		w := &Writer{Metadata: map[string]string{}}
		for i := range 50 {
			k := string(rune('a'+i%26)) + string(rune('a'+i/26))
			w.Metadata[k] = k
		}
		for i := range 20 {
			dt := Dtypes()[i%len(Dtypes())]
			if dt == F4 || dt == F6_E2M3 || dt == F6_E3M2 {
				dt = BF16
			}
			n := int64(i + 1)
			data := bytes.Repeat([]byte{byte(i)}, int(n)*dt.Bits()/8)
			w.Tensors = append(w.Tensors, WriterTensor{Name: "t" + string(rune('a'+i)), Dtype: dt, Shape: []int64{n}, Data: Bytes(data)})
		}
		if rev {
			for i, j := 0, len(w.Tensors)-1; i < j; i, j = i+1, j-1 {
				w.Tensors[i], w.Tensors[j] = w.Tensors[j], w.Tensors[i]
			}
		}
		return w
	}
	a, b := writeBytes(t, mk(false)), writeBytes(t, mk(true))
	if !bytes.Equal(a, b) {
		t.Fatal("output depends on input order")
	}
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "1.safetensors"), filepath.Join(dir, "2.safetensors")
	if err := WriteFile(p1, mk(false)); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p2, mk(true)); err != nil {
		t.Fatal(err)
	}
	f1, _ := os.ReadFile(p1)
	f2, _ := os.ReadFile(p2)
	if !bytes.Equal(f1, a) || !bytes.Equal(f2, a) {
		t.Fatal("WriteFile differs from WriteTo")
	}
	if len(a) < 8 || binary.LittleEndian.Uint64(a)%8 != 0 {
		t.Fatal("header not padded to 8")
	}
}

// Every dtype round-trips through writer and reader with its bytes intact.
func TestRoundTripAllDtypes(t *testing.T) {
	w := &Writer{Metadata: map[string]string{"format": "pt"}}
	want := map[string][]byte{}
	for i, dt := range Dtypes() {
		n := int64(8) // a multiple of 8 elements fills whole bytes for F4 and F6 too
		data := make([]byte, n*int64(dt.Bits())/8)
		for j := range data {
			data[j] = byte(i*31 + j*7)
		}
		name := "w." + string(dt)
		want[name] = data
		w.Tensors = append(w.Tensors, WriterTensor{Name: name, Dtype: dt, Shape: []int64{2, n / 2}, Data: Bytes(data)})
	}
	p := filepath.Join(t.TempDir(), "all.safetensors")
	if err := WriteFile(p, w); err != nil {
		t.Fatal(err)
	}
	for _, mmap := range []bool{true, false} {
		useMmap = mmap
		m, err := Open(p)
		useMmap = true
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Tensors) != len(Dtypes()) || m.Metadata["format"] != "pt" {
			t.Fatalf("got %d tensors, metadata %v", len(m.Tensors), m.Metadata)
		}
		for i, ti := range m.Tensors {
			if i > 0 && m.Tensors[i-1].Name >= ti.Name {
				t.Fatal("tensors not sorted by name")
			}
			got, err := m.Data(ti.Name)
			if err != nil || !bytes.Equal(got, want[ti.Name]) {
				t.Fatalf("%s: %v %x != %x", ti.Name, err, got, want[ti.Name])
			}
			if ti.Dtype != Dtype(strings.TrimPrefix(ti.Name, "w.")) || len(ti.Shape) != 2 || ti.Shape[0] != 2 || ti.Shape[1] != 4 {
				t.Fatalf("%s: %+v", ti.Name, ti)
			}
		}
		m.Close()
		if _, err := m.Data(m.Tensors[0].Name); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("Data after Close: %v", err)
		}
	}
}

type shortWriter struct{ n int }

func (s shortWriter) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(make([]byte, s.n))
	return int64(n), err
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name string
		w    Writer
		want string
	}{
		{"short data", Writer{Tensors: []WriterTensor{{Name: "a", Dtype: F32, Shape: []int64{2}, Data: shortWriter{4}}}}, "wrote 4 bytes, expected 8"},
		{"long data", Writer{Tensors: []WriterTensor{{Name: "a", Dtype: F32, Shape: []int64{2}, Data: shortWriter{12}}}}, "longer than"},
		{"nil data", Writer{Tensors: []WriterTensor{{Name: "a", Dtype: F32, Shape: []int64{2}}}}, "no data"},
		{"unknown dtype", Writer{Tensors: []WriterTensor{{Name: "a", Dtype: "F7", Shape: []int64{2}}}}, "unknown dtype"},
		{"negative dim", Writer{Tensors: []WriterTensor{{Name: "a", Dtype: F32, Shape: []int64{-2}}}}, "negative"},
		{"odd F4", Writer{Tensors: []WriterTensor{{Name: "a", Dtype: F4, Shape: []int64{3}, Data: shortWriter{2}}}}, "whole number of bytes"},
		{"duplicate", Writer{Tensors: []WriterTensor{{Name: "a", Dtype: U8, Shape: []int64{0}}, {Name: "a", Dtype: U8, Shape: []int64{0}}}}, "duplicate"},
		{"reserved name", Writer{Tensors: []WriterTensor{{Name: "__metadata__", Dtype: U8, Shape: []int64{0}}}}, "invalid tensor name"},
		{"bad utf8", Writer{Tensors: []WriterTensor{{Name: "\xff", Dtype: U8, Shape: []int64{0}}}}, "invalid tensor name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.w.WriteTo(io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			p := filepath.Join(t.TempDir(), "x.safetensors")
			if err := WriteFile(p, &tt.w); err == nil {
				t.Fatal("WriteFile succeeded")
			}
			if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 0 {
				t.Fatalf("WriteFile left %v behind", ents)
			}
		})
	}
}
