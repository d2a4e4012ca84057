package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/testkit"
)

func parseBytes(b []byte) (*File, error) {
	return Parse(bytes.NewReader(b), int64(len(b)), "x.gguf")
}

func TestParseBase(t *testing.T) {
	b := baseFile().bytes()
	f, err := parseBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 32 || f.DataOffset != 256 || len(f.Tensors) != 2 {
		t.Fatalf("got version %d alignment %d data offset %d, %d tensors", f.Version, f.Alignment, f.DataOffset, len(f.Tensors))
	}
	if s, _ := f.Metadata.String("general.architecture"); s != "llama" {
		t.Errorf("architecture %q", s)
	}
	if toks, _ := f.Metadata.Strings("tokenizer.ggml.tokens"); len(toks) != 2 || toks[0] != "<s>" || toks[1] != "hi" {
		t.Errorf("tokens %q", toks)
	}
	tb, ok := f.Tensor("b")
	if !ok || tb.Type != Q8_0 || tb.Offset != 32 || tb.Bytes() != 34 || tb.Elements() != 32 {
		t.Fatalf("tensor b = %+v", tb)
	}
	data, err := f.Data(tb)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, b[256+32:256+32+34]) {
		t.Errorf("tensor b data differs")
	}
	// Truncated only in the last tensor's padding: the tensor itself is
	// complete, which is what llama.cpp's loader requires, so it is accepted.
	if _, err := parseBytes(b[:256+32+34]); err != nil {
		t.Errorf("file without the final padding: %v", err)
	}
}

// TestParseV2 checks that v2 (same layout as v3) is read.
func TestParseV2(t *testing.T) {
	r := baseFile()
	r.version = 2
	f, err := parseBytes(r.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 {
		t.Fatalf("version %d", f.Version)
	}
}

func TestParseAllValueTypes(t *testing.T) {
	r := rawFile{magic: "GGUF", version: 3, kvs: []rawKV{
		{"u8", cat(le32(0), []byte{200})},
		{"i8", cat(le32(1), []byte{0xff})},
		{"u16", cat(le32(2), []byte{1, 2})},
		{"i16", cat(le32(3), []byte{0xfe, 0xff})},
		{"u32", vU32(7)},
		{"i32", vI32(-7)},
		{"f32", vF32(1.5)},
		{"bool", vBool(1)},
		{"bool2", vBool(2)}, // ggml: any non-zero byte is true
		{"str", vStr("héllo")},
		{"u64", vU64(1 << 40)},
		{"i64", cat(le32(11), le64(^uint64(0)))},
		{"f64", cat(le32(12), le64(0x3ff8000000000000))},
		{"au8", vArr(0, 3, []byte{1, 2, 3})},
		{"ai32", vArr(5, 2, le32(1), le32(0xffffffff))},
		{"af32", vArr(6, 1, le32(0x3fc00000))},
		{"abool", vArr(7, 2, []byte{0, 1})},
		{"astr", vArr(8, 0)},
		{"au64", vArr(10, 1, le64(5))},
	}}
	f, err := parseBytes(r.bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"u8": uint8(200), "i8": int8(-1), "u16": uint16(0x201), "i16": int16(-2), "u32": uint32(7),
		"i32": int32(-7), "f32": float32(1.5), "bool": true, "bool2": true, "str": "héllo",
		"u64": uint64(1 << 40), "i64": int64(-1), "f64": 1.5,
	}
	for k, w := range want {
		if v, _ := f.Metadata.Get(k); v != w {
			t.Errorf("%s = %#v, want %#v", k, v, w)
		}
	}
	if v, _ := f.Metadata.Get("au8"); !bytes.Equal(v.([]uint8), []byte{1, 2, 3}) {
		t.Errorf("au8 = %v", v)
	}
	if v, _ := f.Metadata.Int32s("ai32"); len(v) != 2 || v[0] != 1 || v[1] != -1 {
		t.Errorf("ai32 = %v", v)
	}
	if v, _ := f.Metadata.Float32s("af32"); len(v) != 1 || v[0] != 1.5 {
		t.Errorf("af32 = %v", v)
	}
	if v, _ := f.Metadata.Get("abool"); v.([]bool)[1] != true || v.([]bool)[0] != false {
		t.Errorf("abool = %v", v)
	}
	if v, ok := f.Metadata.Strings("astr"); !ok || len(v) != 0 {
		t.Errorf("astr = %v %v", v, ok)
	}
	if v, _ := f.Metadata.Get("au64"); v.([]uint64)[0] != 5 {
		t.Errorf("au64 = %v", v)
	}
	if f.DataOffset != int64(len(r.bytes())) {
		t.Errorf("data offset %d for a file of %d bytes with no tensors", f.DataOffset, len(r.bytes()))
	}
}

// TestParseMalformed feeds broken files and checks that each fails with a
// FormatError naming the problem (and the file, key or tensor).
func TestParseMalformed(t *testing.T) {
	good := baseFile().bytes()
	mod := func(f func(r *rawFile)) []byte {
		r := baseFile()
		f(&r)
		return r.bytes()
	}
	setKV := func(r *rawFile, i int, key string, val []byte) { r.kvs[i] = rawKV{key, val} }
	cases := []struct {
		name string
		data []byte
		want []string // substrings of the error
	}{
		// Truncation in every section (offsets from the base layout).
		{"empty", nil, []string{"truncated", "magic"}},
		{"trunc magic", good[:2], []string{"truncated", "magic"}},
		{"trunc version", good[:6], []string{"truncated", "version"}},
		{"trunc tensor count", good[:12], []string{"truncated", "tensor count"}},
		{"trunc metadata count", good[:20], []string{"truncated", "metadata count"}},
		{"trunc key length", good[:28], []string{"truncated", "key #0 length"}},
		{"trunc key bytes", good[:40], []string{"key #0 is 20 bytes long", "truncated"}},
		{"trunc value type", good[:54], []string{`key "general.architecture"`, "truncated", "value type"}},
		{"trunc string value", good[:66], []string{`key "general.architecture"`, "string value", "truncated"}},
		{"trunc array type", good[:100], []string{`key "tokenizer.ggml.tokens"`, "truncated"}},
		{"trunc array length", good[:110], []string{`key "tokenizer.ggml.tokens"`, "array length", "truncated"}},
		{"trunc array strings", good[:120], []string{`key "tokenizer.ggml.tokens"`, "array of 2 STRING", "truncated"}},
		{"trunc array string", good[:130], []string{`key "tokenizer.ggml.tokens"`, "array string #1", "truncated"}},
		{"trunc third key", good[:150], []string{"key #2", "truncated"}},
		{"trunc u32 value", good[:166], []string{`key "general.alignment"`, "UINT32 value", "truncated"}},
		{"trunc tensor name length", good[:172], []string{"tensor #0 name length", "truncated"}},
		{"trunc dims", good[:185], []string{`tensor "a"`, "dimension 0", "truncated"}},
		{"trunc type", good[:199], []string{`tensor "a"`, "type", "truncated"}},
		{"trunc offset", good[:205], []string{`tensor "a"`, "data offset", "truncated"}},
		{"trunc second tensor", good[:212], []string{"tensor #1 name length", "truncated"}},
		{"trunc padding", good[:245], []string{"truncated", "data section starts at byte 256"}},
		{"trunc first tensor data", good[:270], []string{`tensor "a"`, "past its end", "truncated"}},
		{"trunc last tensor data", good[:300], []string{`tensor "b"`, "past its end", "truncated"}},

		// Counts and lengths far beyond the file.
		{"n_tensors 2^62", mod(func(r *rawFile) { r.nTensors = u64p(1 << 62) }), []string{"tensor count 4611686018427387904 is impossible"}},
		{"n_tensors negative", mod(func(r *rawFile) { r.nTensors = u64p(1 << 63) }), []string{"tensor count -9223372036854775808"}},
		{"n_kv huge", mod(func(r *rawFile) { r.nKV = u64p(1 << 62) }), []string{"metadata count 4611686018427387904 is impossible"}},
		{"n_kv too many", mod(func(r *rawFile) { r.nKV = u64p(4) }), nil}, // the tensor infos are misread as a fourth pair
		{"key longer than file", mod(func(r *rawFile) { r.kvs[0].key = "" }), []string{"key #0 is empty"}},
		{"string longer than file", mod(func(r *rawFile) { setKV(r, 0, "general.name", cat(le32(8), le64(1<<62))) }),
			[]string{`key "general.name"`, "string value is 4611686018427387904 bytes long, at most 1073741824"}},
		{"string past end", mod(func(r *rawFile) { setKV(r, 0, "general.name", cat(le32(8), le64(100000))) }),
			[]string{`key "general.name"`, "string value is 100000 bytes long, but only", "left"}},
		{"array count huge", mod(func(r *rawFile) { setKV(r, 1, "scores", cat(le32(9), le32(6), le64(1<<62))) }),
			[]string{`key "scores"`, "array of 4611686018427387904 elements, at most 1073741824"}},
		{"array past end", mod(func(r *rawFile) { setKV(r, 1, "scores", cat(le32(9), le32(6), le64(1<<20))) }),
			[]string{`key "scores"`, "array of 1048576 FLOAT32 elements needs at least 4194304 bytes"}},
		{"string array past end", mod(func(r *rawFile) { setKV(r, 1, "toks", cat(le32(9), le32(8), le64(1<<20))) }),
			[]string{`key "toks"`, "array of 1048576 STRING elements"}},

		// Value types.
		{"duplicate key", mod(func(r *rawFile) { r.kvs[1].key = "general.architecture" }), []string{`key "general.architecture"`, "duplicate key"}},
		{"unknown value type", mod(func(r *rawFile) { setKV(r, 0, "k", cat(le32(13), le32(0))) }), []string{`key "k"`, "invalid value type 13"}},
		{"unknown array type", mod(func(r *rawFile) { setKV(r, 1, "k", cat(le32(9), le32(99), le64(0))) }), []string{`key "k"`, "invalid array element type 99"}},
		{"nested array", mod(func(r *rawFile) { setKV(r, 1, "k", vArr(9, 1, vArr(0, 0))) }), []string{`key "k"`, "nested arrays"}},
		{"alignment type u64", mod(func(r *rawFile) { setKV(r, 2, "general.alignment", vU64(32)) }), []string{`key "general.alignment"`, "must be of type UINT32, not UINT64"}},
		{"alignment type i32", mod(func(r *rawFile) { setKV(r, 2, "general.alignment", vI32(32)) }), []string{`key "general.alignment"`, "UINT32, not INT32"}},
		{"alignment array", mod(func(r *rawFile) { setKV(r, 2, "general.alignment", vArr(4, 1, le32(32))) }), []string{`key "general.alignment"`, "not an array"}},
		{"alignment 0", mod(func(r *rawFile) { setKV(r, 2, "general.alignment", vU32(0)) }), []string{`key "general.alignment"`, "alignment 0 is not a non-zero power of two"}},
		{"alignment 48", mod(func(r *rawFile) { setKV(r, 2, "general.alignment", vU32(48)) }), []string{"alignment 48 is not"}},

		// Header.
		{"bad magic", mod(func(r *rawFile) { r.magic = "GGML" }), []string{`bad magic "GGML"`}},
		{"version 0", mod(func(r *rawFile) { r.version = 0 }), []string{"version 0 is invalid"}},
		{"v1", mod(func(r *rawFile) { r.version = 1 }), []string{"GGUF v1 is not supported"}},
		{"version 4", mod(func(r *rawFile) { r.version = 4 }), []string{"version 4 is newer"}},
		{"big-endian", mod(func(r *rawFile) { r.version = 0x03000000 }), []string{"big-endian", "0x03000000"}},
		{"big-endian v2", mod(func(r *rawFile) { r.version = 0x02000000 }), []string{"big-endian"}},

		// Tensor infos.
		{"duplicate tensor", mod(func(r *rawFile) { r.tensors[1].name = "a" }), []string{`tensor "a"`, "duplicate tensor name"}},
		{"long tensor name", mod(func(r *rawFile) { r.tensors[0].name = strings.Repeat("n", 64) }), []string{"tensor #0 name is 64 bytes long, at most 63"}},
		{"tensor name 2^62", mod(func(r *rawFile) { r.tensors = nil; r.nTensors = u64p(1); r.data = le64(1 << 62) }), []string{"tensor #0 name is 4611686018427387904 bytes long"}},
		{"NUL in tensor name", mod(func(r *rawFile) { r.tensors[1].name = "b\x00c" }), []string{"NUL byte"}},
		{"unknown tensor type", mod(func(r *rawFile) { r.tensors[1].typ = 99 }), []string{`tensor "b"`, "invalid ggml type 99"}},
		{"removed tensor type", mod(func(r *rawFile) { r.tensors[1].typ = 4 }), []string{`tensor "b"`, "invalid ggml type 4"}},
		{"type count", mod(func(r *rawFile) { r.tensors[1].typ = uint32(TypeCount) }), []string{"invalid ggml type 43"}},
		{"5 dims", mod(func(r *rawFile) { r.tensors[0].dims = []int64{1, 1, 1, 1, 1} }), []string{`tensor "a"`, "5 dimensions, at most 4"}},
		{"negative dim", mod(func(r *rawFile) { r.tensors[0].dims = []int64{4, -2} }), []string{`tensor "a"`, "dimension 1 is -2"}},
		{"partial block", mod(func(r *rawFile) { r.tensors[1].dims = []int64{16, 2} }), []string{`tensor "b"`, "row length 16 is not a multiple of Q8_0's block size 32"}},
		{"elements overflow", mod(func(r *rawFile) { r.tensors[0].dims = []int64{1 << 32, 1 << 31} }), []string{`tensor "a"`, "too many elements"}},

		// Offsets and data.
		{"misaligned offset", mod(func(r *rawFile) { r.tensors[1].off = 36 }), []string{`tensor "b"`, "offset 36, expected 32"}},
		{"offset not running sum", mod(func(r *rawFile) { r.tensors[1].off = 64 }), []string{`tensor "b"`, "offset 64, expected 32"}},
		{"first offset", mod(func(r *rawFile) { r.tensors[0].off = 32 }), []string{`tensor "a"`, "offset 32, expected 0"}},
		{"offset past EOF", mod(func(r *rawFile) { r.tensors[1].off = 1 << 60 }), []string{`tensor "b"`, "offset 1152921504606846976, expected 32"}},
		// A wrong size is blamed on the tensor that has it, not on the
		// next one whose offset then looks wrong.
		{"zero dimension before the last tensor", mod(func(r *rawFile) { r.tensors[0].dims = []int64{4, 0} }),
			[]string{`tensor "a"`, "shape [4 0] of type F32 makes 0 bytes (0 padded), but the next tensor \"b\" starts 32 bytes after it"}},
		{"changed type before the last tensor", mod(func(r *rawFile) { r.tensors[0].typ = uint32(F64) }),
			[]string{`tensor "a"`, "shape [4 2] of type F64 makes 64 bytes (64 padded), but the next tensor \"b\" starts 32 bytes after it"}},
		{"zero dimension on a middle tensor", mod(func(r *rawFile) {
			r.tensors[1].dims = []int64{32, 0}
			r.tensors = append(r.tensors, rawTensor{"c", []int64{4}, uint32(F32), 96})
			r.data = append(r.data, make([]byte, 32)...)
		}), []string{`tensor "b"`, "shape [32 0] of type Q8_0 makes 0 bytes", `next tensor "c" starts 64 bytes after it`}},
		{"tensor past EOF", mod(func(r *rawFile) { r.tensors[1].dims = []int64{32, 1000} }), []string{`tensor "b"`, "past its end"}},
		{"unpadded data section", mod(func(r *rawFile) { r.align = 0; r.data = r.data[:66] }), []string{`tensor "b"`, "past its end"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseBytes(c.data)
			if err == nil {
				t.Fatal("no error")
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FormatError: %v", err, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "gguf: x.gguf: ") {
				t.Errorf("error does not name the file: %s", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// TestParseEveryTruncation cuts the base file at every length: each cut
// before the end of the last tensor's data fails, none panics.
func TestParseEveryTruncation(t *testing.T) {
	good := baseFile().bytes()
	end := 256 + 32 + 34
	for n := range len(good) {
		_, err := parseBytes(good[:n])
		if n < end && err == nil {
			t.Errorf("cut at %d: no error", n)
		}
		if n >= end && err != nil {
			t.Errorf("cut at %d (only padding missing): %v", n, err)
		}
	}
}

// TestParseHugeCountsAllocateLittle checks that absurd counts and lengths
// fail before anything sized by them is allocated.
func TestParseHugeCountsAllocateLittle(t *testing.T) {
	mod := func(f func(r *rawFile)) []byte {
		r := baseFile()
		f(&r)
		return r.bytes()
	}
	pad := make([]byte, 1<<20) // plenty of bytes left, so only the limits stop it
	cases := map[string][]byte{
		"n_tensors 2^62":            mod(func(r *rawFile) { r.nTensors = u64p(1 << 62) }),
		"n_kv 2^62":                 mod(func(r *rawFile) { r.nKV = u64p(1 << 62) }),
		"string 2^62":               mod(func(r *rawFile) { r.kvs[0].val = cat(le32(8), le64(1<<62)) }),
		"array 2^62":                mod(func(r *rawFile) { r.kvs[1].val = cat(le32(9), le32(6), le64(1<<62)) }),
		"str array 2^62":            mod(func(r *rawFile) { r.kvs[1].val = cat(le32(9), le32(8), le64(1<<62)) }),
		"n_kv 2^17 of a 1 MiB file": mod(func(r *rawFile) { r.nKV = u64p(1 << 17); r.data = append(r.data, pad...) }),
		"str array 2^17 of a 1 MiB file": mod(func(r *rawFile) {
			r.kvs[1].val = cat(le32(9), le32(8), le64(1<<17))
			r.data = append(r.data, pad...)
		}),
	}
	for name, b := range cases {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := parseBytes(b)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		// 2^62 cases must stop at once (the 64 KiB read buffer and small
		// change); the 1 MiB cases read real entries, about their size.
		limit := uint64(256 << 10)
		if strings.Contains(name, "1 MiB") {
			limit = 2 << 20
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > limit {
			t.Errorf("%s: allocated %d bytes", name, got)
		}
	}
}

// fixtureGGUFs lists stories260K and every llama.cpp test vocabulary.
func fixtureGGUFs(t testing.TB) []string {
	return append(testkit.Vocabs(t), testkit.Stories(t, "stories260K-llamacpp.gguf"))
}

// TestOpenStories checks facts stated in the fixtures README.
func TestOpenStories(t *testing.T) {
	f, err := Open(testkit.Stories(t, "stories260K-llamacpp.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || len(f.Metadata) != 19 || len(f.Tensors) != 48 || f.Alignment != 32 || f.DataOffset != 14176 {
		t.Fatalf("v%d, %d pairs, %d tensors, alignment %d, data at %d", f.Version, len(f.Metadata), len(f.Tensors), f.Alignment, f.DataOffset)
	}
	if f.mapped == nil {
		t.Error("file was not memory-mapped")
	}
	if a, _ := f.Metadata.String("general.architecture"); a != "llama" {
		t.Errorf("architecture %q", a)
	}
	if n, _ := f.Metadata.Int("llama.context_length"); n != 128 {
		t.Errorf("context length %d", n)
	}
	if n, ok := f.Metadata.Int("tokenizer.ggml.seperator_token_id"); !ok || n != 0xFFFFFFFF {
		t.Errorf("separator %d %v", n, ok)
	}
	if eps, _ := f.Metadata.Float("llama.attention.layer_norm_rms_epsilon"); float32(eps) != 1e-5 {
		t.Errorf("eps %v", eps)
	}
	emb, ok1 := f.Tensor("token_embd.weight")
	out, ok2 := f.Tensor("output.weight")
	if !ok1 || !ok2 || emb.Dims[0] != 64 || emb.Dims[1] != 512 || emb.Type != F32 {
		t.Fatalf("token_embd %+v", emb)
	}
	a, _ := f.Data(emb)
	b, _ := f.Data(out)
	if !bytes.Equal(a, b) {
		t.Error("output.weight is not a copy of token_embd.weight")
	}
	// The same data through the ReadAt path.
	fd, _ := os.Open(f.Path)
	defer fd.Close()
	st, _ := fd.Stat()
	g, err := Parse(fd, st.Size(), f.Path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.Data(&g.Tensors[0])
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := f.Data(&f.Tensors[0]); !bytes.Equal(c, want) {
		t.Error("ReadAt and mmap data differ")
	}
	f.Close()
	if _, err := f.Data(emb); err == nil {
		t.Error("Data after Close succeeded")
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Error("missing file opened")
	}
	p := filepath.Join(t.TempDir(), "empty.gguf")
	os.WriteFile(p, nil, 0o644)
	_, err := Open(p)
	if err == nil || !strings.Contains(err.Error(), "empty.gguf") || !strings.Contains(err.Error(), "magic") {
		t.Errorf("empty file: %v", err)
	}
}
