package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/testkit"
)

// llama2cWeights reads the legacy llama2.c checkpoint of the same model:
// 7 int32 config values, then the float32 tensors in a fixed order.
func llama2cWeights(t *testing.T) map[string][]float32 {
	raw, err := os.ReadFile(testkit.Stories(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg [7]int32
	binary.Read(bytes.NewReader(raw), binary.LittleEndian, &cfg)
	dim, hidden, layers, heads, kvHeads, vocab := int(cfg[0]), int(cfg[1]), int(cfg[2]), int(cfg[3]), int(cfg[4]), int(cfg[5])
	kvDim := dim * kvHeads / heads
	fl := make([]float32, (len(raw)-28)/4)
	binary.Read(bytes.NewReader(raw[28:]), binary.LittleEndian, fl)
	out := map[string][]float32{}
	next := func(n int) []float32 { s := fl[:n]; fl = fl[n:]; return s }
	perLayer := func(name string, n int) {
		for l := range layers {
			out[fmt.Sprintf("model.layers.%d.%s", l, name)] = next(n)
		}
	}
	out["model.embed_tokens.weight"] = next(vocab * dim)
	perLayer("input_layernorm.weight", dim)
	next(layers * dim * dim)   // wq: HF rows are permuted
	next(layers * dim * kvDim) // wk: likewise
	perLayer("self_attn.v_proj.weight", dim*kvDim)
	perLayer("self_attn.o_proj.weight", dim*dim)
	perLayer("post_attention_layernorm.weight", dim)
	perLayer("mlp.gate_proj.weight", hidden*dim)
	perLayer("mlp.down_proj.weight", dim*hidden)
	perLayer("mlp.up_proj.weight", hidden*dim)
	out["model.norm.weight"] = next(dim)
	return out
}

// The HF conversion of stories260K: 47 F32 tensors with format=pt, whose
// values equal those of the independent llama2.c checkpoint.
func TestFixtureStories260K(t *testing.T) {
	p := testkit.Stories(t, "hf/model.safetensors")
	for _, path := range []string{p, filepath.Dir(p)} {
		for _, mm := range []bool{true, false} {
			useMmap = mm
			m, err := Open(path)
			useMmap = true
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Tensors) != 47 || len(m.Metadata) != 1 || m.Metadata["format"] != "pt" {
				t.Fatalf("%d tensors, metadata %v", len(m.Tensors), m.Metadata)
			}
			for _, ti := range m.Tensors {
				if ti.Dtype != F32 || ti.File != p {
					t.Fatalf("%+v", ti)
				}
			}
			emb, _ := m.Tensor("model.embed_tokens.weight")
			if fmt.Sprint(emb.Shape) != "[512 64]" {
				t.Fatalf("embedding shape %v", emb.Shape)
			}
			if q, _ := m.Tensor("model.layers.4.self_attn.k_proj.weight"); fmt.Sprint(q.Shape) != "[32 64]" {
				t.Fatalf("k_proj shape %v", q.Shape)
			}
			if _, ok := m.Tensor("lm_head.weight"); ok {
				t.Fatal("tied model has lm_head")
			}
			ref := llama2cWeights(t)
			for name, want := range ref {
				got := make([]float32, len(want))
				if err := m.Float32(name, got); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s[%d] = %v, llama2.c has %v", name, i, got[i], want[i])
					}
				}
			}
			m.Close()
		}
	}
}

// Rewriting the fixture with our writer gives a file that reads the same.
func TestFixtureRewrite(t *testing.T) {
	p := testkit.Stories(t, "hf/model.safetensors")
	m, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := &Writer{Metadata: m.Metadata}
	for _, ti := range m.Tensors {
		d, _ := m.Data(ti.Name)
		w.Tensors = append(w.Tensors, WriterTensor{Name: ti.Name, Dtype: ti.Dtype, Shape: ti.Shape, Data: Bytes(d)})
	}
	out := filepath.Join(t.TempDir(), "model.safetensors")
	if err := WriteFile(out, w); err != nil {
		t.Fatal(err)
	}
	m2, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	sameModel(t, m, m2)

	orig, _ := os.ReadFile(p)
	ours, _ := os.ReadFile(out)
	if bytes.Equal(orig, ours) {
		t.Log("rewrite is byte-identical to the original")
		return
	}
	// The original lists tensors in model order (embed, layer 0 input
	// norm, q, k, v, o, …), which is not the Rust writer's dtype-then-name
	// order that ours follows, so header and data order differ (and with
	// them the offsets' digits and the padding).
	var order []string
	for _, ti := range m.Tensors {
		order = append(order, fmt.Sprintf("%020d", ti.Begin))
	}
	if slices.IsSorted(order) {
		t.Fatal("original is in name order, yet our rewrite differs")
	}
	if !bytes.Equal(orig[len(orig)-256:], ours[len(ours)-256:]) {
		t.Error("last tensor differs although model.norm.weight is last in both orders")
	}
	t.Logf("rewrite (%d bytes) differs from the original (%d bytes) in tensor order only", len(ours), len(orig))
}

func sameModel(t *testing.T, a, b *Model) {
	t.Helper()
	if len(a.Tensors) != len(b.Tensors) || fmt.Sprint(a.Metadata) != fmt.Sprint(b.Metadata) {
		t.Fatalf("%d vs %d tensors, metadata %v vs %v", len(a.Tensors), len(b.Tensors), a.Metadata, b.Metadata)
	}
	for i, x := range a.Tensors {
		y := b.Tensors[i]
		if x.Name != y.Name || x.Dtype != y.Dtype || fmt.Sprint(x.Shape) != fmt.Sprint(y.Shape) {
			t.Fatalf("%+v vs %+v", x, y)
		}
		dx, _ := a.Data(x.Name)
		dy, _ := b.Data(y.Name)
		if !bytes.Equal(dx, dy) {
			t.Fatalf("%s: data differs", x.Name)
		}
	}
}

func TestSharded(t *testing.T) {
	m, err := Open(testkit.Stories(t, "hf/model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := &Writer{Metadata: m.Metadata}
	var total int64
	for _, ti := range m.Tensors {
		d, _ := m.Data(ti.Name)
		total += int64(len(d))
		w.Tensors = append(w.Tensors, WriterTensor{Name: ti.Name, Dtype: ti.Dtype, Shape: ti.Shape, Data: Bytes(d)})
	}
	dir := filepath.Join(t.TempDir(), "sharded")
	if err := WriteSharded(dir, w, 3); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := "[.qnnprep-outputs model-00001-of-00003.safetensors model-00002-of-00003.safetensors model-00003-of-00003.safetensors model.safetensors.index.json]"; fmt.Sprint(names) != want {
		t.Fatalf("files %v", names)
	}
	var idx struct {
		Metadata struct {
			TotalSize int64 `json:"total_size"`
		}
		WeightMap map[string]string `json:"weight_map"`
	}
	raw, _ := os.ReadFile(filepath.Join(dir, IndexName))
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	if idx.Metadata.TotalSize != total || len(idx.WeightMap) != 47 {
		t.Fatalf("total_size %d (want %d), %d entries", idx.Metadata.TotalSize, total, len(idx.WeightMap))
	}
	if !strings.HasPrefix(string(raw), "{\n  \"metadata\": {\n    \"total_size\": ") {
		t.Fatalf("index not in json.dumps(indent=2) layout: %.60q", raw)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sameModel(t, m, s)
	si, err := Open(filepath.Join(dir, IndexName)) // the index file itself
	if err != nil {
		t.Fatal(err)
	}
	sameModel(t, m, si)
	si.Close()
	files := map[string]int{}
	for _, ti := range s.Tensors {
		files[filepath.Base(ti.File)]++
		if idx.WeightMap[ti.Name] != filepath.Base(ti.File) {
			t.Fatalf("%s in %s, index says %s", ti.Name, ti.File, idx.WeightMap[ti.Name])
		}
	}
	if len(files) != 3 {
		t.Fatalf("tensors spread over %v", files)
	}
	// Rewriting gives identical files.
	dir2 := filepath.Join(t.TempDir(), "again")
	if err := WriteSharded(dir2, w, 3); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		a, _ := os.ReadFile(filepath.Join(dir, n))
		b, _ := os.ReadFile(filepath.Join(dir2, n))
		if !bytes.Equal(a, b) {
			t.Fatalf("%s differs between two runs", n)
		}
	}
	if err := WriteSharded(t.TempDir(), w, 48); err == nil {
		t.Fatal("48 shards of 47 tensors accepted")
	}
}

func TestOpenDir(t *testing.T) {
	small := fileBytes(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, []byte{1, 2})
	dir := t.TempDir()
	if _, err := Open(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty dir: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "weights.safetensors"), small, 0o644)
	os.WriteFile(filepath.Join(dir, ".hidden.safetensors"), []byte("junk"), 0o644)
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Tensors[0].File != filepath.Join(dir, "weights.safetensors") {
		t.Fatal(m.Tensors[0].File)
	}
	m.Close()
	os.WriteFile(filepath.Join(dir, "other.safetensors"), small, 0o644)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "2 .safetensors files") {
		t.Fatalf("two files: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors"), small, 0o644)
	m, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(m.Tensors[0].File) != "model.safetensors" {
		t.Fatal(m.Tensors[0].File)
	}
	m.Close()
	if _, err := Open(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

func TestMalformed(t *testing.T) {
	t32 := func(name string, b, e int) string {
		return fmt.Sprintf(`%q:{"dtype":"F32","shape":[%d],"data_offsets":[%d,%d]}`, name, (e-b)/4, b, e)
	}
	obj := func(entries ...string) string { return "{" + strings.Join(entries, ",") + "}" }
	zeros := func(n int) []byte { return make([]byte, n) }
	lenOnly := func(n uint64, rest int) []byte {
		return append(binary.LittleEndian.AppendUint64(nil, n), make([]byte, rest)...)
	}
	tests := []struct {
		name   string
		file   []byte
		kind   error
		tensor string // must appear in the message
		msg    string // must appear in the message
	}{
		{"truncated header length", []byte{1, 2, 3, 4, 5}, ErrTooShort, "", "too short"},
		{"empty file", nil, ErrTooShort, "", "0 bytes"},
		{"header length 2^63", lenOnly(1<<63, 16), ErrHeaderTooLarge, "", "9223372036854775808"},
		{"header length 2^64-1", lenOnly(math.MaxUint64, 16), ErrHeaderTooLarge, "", "limit"},
		{"header longer than file", lenOnly(1000, 100), ErrHeaderLength, "", "only 100 bytes follow"},
		{"non-JSON", fileBytes(`{not json}`, nil), ErrHeader, "", "not valid JSON"},
		{"header not an object", fileBytes(`[1,2,3]`, nil), ErrHeader, "", "starting with '{'"},
		{"leading space", fileBytes(` {}`, nil), ErrHeader, "", "starting with '{'"},
		{"unterminated", fileBytes(`{"a":{"dtype":"F32"`, nil), ErrHeader, "", "ends early"},
		{"junk after object", fileBytes(`{}  x`, nil), ErrHeader, "", "after the header object"},
		{"invalid UTF-8", fileBytes("{\"\xff\":1}", nil), ErrHeader, "", "UTF-8"},
		{"metadata non-string", fileBytes(`{"__metadata__":{"format":1}}`, nil), ErrMetadata, "", "string value"},
		{"metadata not object", fileBytes(`{"__metadata__":"pt"}`, nil), ErrMetadata, "", "expected an object"},
		{"metadata twice", fileBytes(`{"__metadata__":{},"__metadata__":{}}`, nil), ErrMetadata, "", "twice"},
		{"tensor not object", fileBytes(`{"w":[1]}`, nil), ErrHeader, "w", "tensor object"},
		{"unknown dtype", fileBytes(obj(`"w":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}`), zeros(1)), ErrDtype, "w", `"F7"`},
		{"dtype not string", fileBytes(obj(`"w":{"dtype":5,"shape":[1],"data_offsets":[0,1]}`), zeros(1)), ErrHeader, "w", "dtype string"},
		{"unknown field", fileBytes(obj(`"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}`), zeros(1)), ErrHeader, "w", `"x"`},
		{"missing shape", fileBytes(obj(`"w":{"dtype":"U8","data_offsets":[0,1]}`), zeros(1)), ErrHeader, "w", "missing field shape"},
		{"negative dim", fileBytes(obj(`"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}`), zeros(1)), ErrShape, "w", "non-negative integer"},
		{"fractional dim", fileBytes(obj(`"w":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}`), zeros(1)), ErrShape, "w", "non-negative integer"},
		{"shape overflow", fileBytes(obj(`"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}`), zeros(4)), ErrShape, "w", "overflows"},
		{"bytes overflow", fileBytes(obj(`"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}`), zeros(4)), ErrShape, "w", "overflows"},
		{"shape x dtype != size", fileBytes(obj(`"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}`), zeros(12)), ErrSize, "w", "hold 12 bytes, shape [2 2] of F32 needs 16"},
		{"F4 odd count", fileBytes(obj(`"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}`), zeros(2)), ErrSize, "w", "whole number of bytes"},
		{"three offsets", fileBytes(obj(`"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}`), zeros(1)), ErrOffsets, "w", "[begin, end]"},
		{"end before begin", fileBytes(obj(`"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}`), zeros(4)), ErrOffsets, "w", "end before begin"},
		{"hole between tensors", fileBytes(obj(t32("a", 0, 4), t32("b", 8, 12)), zeros(12)), ErrOffsets, "b", "hole: expected begin 4"},
		{"hole at start", fileBytes(obj(t32("a", 4, 8)), zeros(8)), ErrOffsets, "a", "hole: expected begin 0"},
		{"overlapping tensors", fileBytes(obj(t32("a", 0, 8), t32("b", 4, 12)), zeros(12)), ErrOffsets, "b", "overlap"},
		{"same offsets", fileBytes(obj(t32("a", 0, 4), t32("b", 0, 4)), zeros(4)), ErrOffsets, "b", "overlap"},
		{"offsets past EOF", fileBytes(obj(t32("a", 0, 4), t32("b", 4, 8)), zeros(6)), ErrOffsets, "b", "past end of data (6 bytes)"},
		{"huge offsets", fileBytes(obj(`"w":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]}`), nil), ErrOffsets, "w", "too large"},
		{"trailing bytes", fileBytes(obj(t32("a", 0, 4)), zeros(5)), ErrDataSize, "", "end at data offset 4 but the data section holds 5"},
		{"data but no tensors", fileBytes(`{}`, zeros(3)), ErrDataSize, "", "trailing"},
		{"duplicate names", fileBytes(obj(t32("a", 0, 4), t32("a", 4, 8)), zeros(8)), ErrDuplicate, "a", "twice"},
		{"empty name", fileBytes(obj(t32("", 0, 4)), zeros(4)), ErrHeader, "", "empty tensor name"},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, fmt.Sprintf("case%02d.safetensors", i))
			if err := os.WriteFile(p, tt.file, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, mm := range []bool{true, false} {
				useMmap = mm
				m, err := Open(p)
				useMmap = true
				if err == nil {
					m.Close()
					t.Fatal("opened")
				}
				checkErr(t, err, tt.kind, p, tt.tensor, tt.msg)
			}
		})
	}
}

func checkErr(t *testing.T, err, kind error, file, tensor, msg string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("error %q is not %v", err, kind)
	}
	s := err.Error()
	if !strings.Contains(s, file) {
		t.Errorf("error %q does not name the file %s", s, file)
	}
	if tensor != "" && !strings.Contains(s, fmt.Sprintf("tensor %q", tensor)) {
		t.Errorf("error %q does not name tensor %q", s, tensor)
	}
	if !strings.Contains(s, msg) {
		t.Errorf("error %q does not say %q", s, msg)
	}
}

func TestMalformedShards(t *testing.T) {
	shard := func(names ...string) []byte {
		var ents []string
		for i, n := range names {
			ents = append(ents, fmt.Sprintf(`%q:{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}`, n, i, i+1))
		}
		return fileBytes("{"+strings.Join(ents, ",")+"}", make([]byte, len(names)))
	}
	type files map[string][]byte
	tests := []struct {
		name   string
		index  string
		shards files
		kind   error
		file   string // file named in the error
		tensor string
		msg    string
	}{
		{"shard path with ..", `{"weight_map":{"a":"../x.safetensors"}}`, nil, ErrShardPath, IndexName, "a", "leaves the model directory"},
		{"shard path ..", `{"weight_map":{"a":".."}}`, nil, ErrShardPath, IndexName, "a", "leaves the model directory"},
		{"absolute shard path", `{"weight_map":{"a":"/etc/passwd"}}`, nil, ErrShardPath, IndexName, "a", "absolute"},
		{"shard in subdirectory", `{"weight_map":{"a":"sub/x.safetensors"}}`, nil, ErrShardPath, IndexName, "a", "separator"},
		{"backslash", `{"weight_map":{"a":"sub\\x.safetensors"}}`, nil, ErrShardPath, IndexName, "a", "separator"},
		{"empty shard name", `{"weight_map":{"a":""}}`, nil, ErrShardPath, IndexName, "a", "empty"},
		{"missing shard", `{"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}}`, files{"s1.safetensors": shard("a")}, ErrMissingShard, IndexName, "", `"s2.safetensors"`},
		{"tensor in map but not in shard", `{"weight_map":{"a":"s1.safetensors","b":"s1.safetensors"}}`, files{"s1.safetensors": shard("a")}, ErrIndex, IndexName, "b", "does not contain it"},
		{"tensor in shard but not in map", `{"weight_map":{"a":"s1.safetensors"}}`, files{"s1.safetensors": shard("a", "c")}, ErrIndex, IndexName, "c", "not listed in weight_map"},
		{"tensor in wrong shard", `{"weight_map":{"a":"s2.safetensors","b":"s2.safetensors"}}`, files{"s2.safetensors": shard("b"), "s1.safetensors": shard("a")}, ErrIndex, IndexName, "a", "does not contain it"},
		{"duplicate across shards", `{"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}}`, files{"s1.safetensors": shard("a"), "s2.safetensors": shard("a", "b")}, ErrDuplicate, "s2.safetensors", "a", `also present in shard "s1.safetensors"`},
		{"bad shard", `{"weight_map":{"a":"s1.safetensors"}}`, files{"s1.safetensors": []byte("xx")}, ErrTooShort, "s1.safetensors", "", "too short"},
		{"index not JSON", `{"weight_map":`, nil, ErrIndex, IndexName, "", "invalid index"},
		{"index weight_map non-string", `{"weight_map":{"a":1}}`, nil, ErrIndex, IndexName, "", "string value"},
		{"index duplicate key", `{"weight_map":{"a":"s1.safetensors","a":"s1.safetensors"}}`, nil, ErrIndex, IndexName, "", "twice"},
		{"index without weight_map", `{"metadata":{"total_size":1}}`, nil, ErrIndex, IndexName, "", "weight_map missing"},
		{"index trailing junk", `{"weight_map":{"a":"s1.safetensors"}} {}`, files{"s1.safetensors": shard("a")}, ErrIndex, IndexName, "", "after the JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, IndexName), []byte(tt.index), 0o644)
			for n, b := range tt.shards {
				os.WriteFile(filepath.Join(dir, n), b, 0o644)
			}
			m, err := Open(dir)
			if err == nil {
				m.Close()
				t.Fatal("opened")
			}
			checkErr(t, err, tt.kind, filepath.Join(dir, tt.file), tt.tensor, tt.msg)
		})
	}
	// The well-formed variant opens, with metadata merged.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, IndexName), []byte(`{"metadata":{"total_size":3},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors"}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "s1.safetensors"), fileBytes(`{"__metadata__":{"format":"pt","x":"1"},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{7}), 0o644)
	os.WriteFile(filepath.Join(dir, "s2.safetensors"), shard("c", "b"), 0o644)
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.Tensors) != 3 || m.Tensors[1].Name != "b" || m.Metadata["x"] != "1" {
		t.Fatalf("%+v %v", m.Tensors, m.Metadata)
	}
	if d, _ := m.Data("a"); !bytes.Equal(d, []byte{7}) {
		t.Fatal(d)
	}
}
