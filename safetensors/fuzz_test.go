package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzHeader feeds arbitrary headers to ParseHeader and to Open, both as a
// header followed by dataSize zero bytes and as a raw file (so the length
// field is fuzzed too). Nothing may panic; ParseHeader and Open must agree;
// whatever opens must be internally consistent and survive a rewrite.
func FuzzHeader(f *testing.F) {
	f.Add([]byte(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`), int64(16))
	f.Add([]byte(`{"__metadata__":{"format":"pt"},"a":{"dtype":"F4","shape":[2,2],"data_offsets":[0,2]},"b":{"dtype":"F8_E4M3","shape":[],"data_offsets":[2,3]}}  `), int64(3))
	f.Add([]byte(`{}`), int64(0))
	f.Fuzz(func(t *testing.T, hdr []byte, dataSize int64) {
		md, ts, perr := ParseHeader(hdr, dataSize, "fuzz")
		if perr == nil {
			checkParsed(t, hdr, dataSize, md, ts)
		} else if !errors.As(perr, new(*FormatError)) {
			t.Fatalf("ParseHeader error is not a *FormatError: %v", perr)
		}

		dir := t.TempDir()
		raw := filepath.Join(dir, "raw.safetensors")
		if err := os.WriteFile(raw, hdr, 0o644); err != nil {
			t.Fatal(err)
		}
		if m, err := Open(raw); err == nil {
			checkModel(t, m)
		}

		if dataSize < 0 || dataSize > 1<<16 {
			return
		}
		p := filepath.Join(dir, "f.safetensors")
		file := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
		file = append(append(file, hdr...), make([]byte, dataSize)...)
		if err := os.WriteFile(p, file, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Open(p)
		if (err == nil) != (perr == nil) {
			t.Fatalf("ParseHeader says %v, Open says %v", perr, err)
		}
		if err == nil {
			checkModel(t, m)
		}
	})
}

func checkParsed(t *testing.T, hdr []byte, dataSize int64, md map[string]string, ts []TensorInfo) {
	base := 8 + int64(len(hdr))
	pos := base
	for _, ti := range ts {
		n, err := byteSize(ti.Dtype, ti.Shape)
		if err != nil || ti.Begin != pos || ti.End-ti.Begin != n {
			t.Fatalf("accepted inconsistent tensor %+v (size %d, %v)", ti, n, err)
		}
		pos = ti.End
	}
	if pos != base+dataSize {
		t.Fatalf("tensors end at %d, data ends at %d", pos, base+dataSize)
	}
	_ = md
}

// checkModel reads every tensor of m, closes it, rewrites it with Writer
// and checks the rewrite opens to the same tensors.
func checkModel(t *testing.T, m *Model) {
	defer m.Close()
	w := &Writer{Metadata: m.Metadata}
	for i, ti := range m.Tensors {
		if i > 0 && m.Tensors[i-1].Name >= ti.Name {
			t.Fatal("tensors not sorted and unique")
		}
		d, err := m.Data(ti.Name)
		if err != nil || int64(len(d)) != ti.Bytes() {
			t.Fatalf("%s: %d bytes, %v", ti.Name, len(d), err)
		}
		if n := ti.Elements(); n <= 1<<16 {
			err := m.Float32(ti.Name, make([]float32, n))
			if err != nil && !errors.Is(err, ErrConvert) {
				t.Fatalf("%s: %v", ti.Name, err)
			}
		}
		w.Tensors = append(w.Tensors, WriterTensor{Name: ti.Name, Dtype: ti.Dtype, Shape: ti.Shape, Data: Bytes(bytes.Clone(d))})
	}
	var buf bytes.Buffer // not WriteFile: its fsync would dominate the fuzzer's time
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	p := filepath.Join(t.TempDir(), "rewrite.safetensors")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	m2, err := Open(p)
	if err != nil {
		t.Fatalf("reopen rewrite: %v", err)
	}
	defer m2.Close()
	sameModel(t, m, m2)
}

// FuzzIndex feeds arbitrary bytes to the parser of
// model.safetensors.index.json. Nothing may panic; every error is a
// *FormatError naming the file; what parses has a non-empty weight_map of
// plain shard file names.
func FuzzIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":16},"weight_map":{"a.weight":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"x"},"weight_map":{"b":"y"}}`))
	f.Add([]byte(`{"weight_map":{}} {}`))
	f.Add([]byte(`{"weight_map":{"a":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		wm, err := parseIndex(b, "index.json")
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != "index.json" {
				t.Fatalf("error %v is not a *FormatError naming the index", err)
			}
			return
		}
		if len(wm) == 0 {
			t.Fatal("an empty weight_map parsed")
		}
		for name, shard := range wm {
			if checkShardName(shard) != nil {
				t.Fatalf("tensor %q: shard %q is not a plain file name", name, shard)
			}
		}
	})
}
