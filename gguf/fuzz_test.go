package gguf

import (
	"bytes"
	"flag"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/qnnprep/qnnprep/testkit"
)

// checkParsed is what every fuzz target asserts about an input the reader
// accepts: every tensor's data can be fetched, and writing the file back
// gives a file that reads back and writes again to the same bytes.
func checkParsed(t *testing.T, in []byte) {
	f, err := parseBytes(in)
	if err != nil {
		var fe *FormatError
		if !errorsAs(err, &fe) {
			t.Fatalf("error is not a *FormatError: %v", err)
		}
		return
	}
	w := &Writer{Metadata: f.Metadata}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.Data(ti)
		if err != nil {
			t.Fatalf("accepted file, but tensor %q: %v", ti.Name, err)
		}
		w.Tensors = append(w.Tensors, WriterTensor{ti.Name, ti.Dims, ti.Type, Bytes(data)})
	}
	var out1 bytes.Buffer
	if _, err := w.WriteTo(&out1); err != nil {
		t.Fatalf("accepted file cannot be written back: %v", err)
	}
	g, err := parseBytes(out1.Bytes())
	if err != nil {
		t.Fatalf("written file does not read back: %v", err)
	}
	if g.DataOffset > f.DataOffset || len(g.Tensors) != len(f.Tensors) || len(g.Metadata) != len(f.Metadata) {
		t.Fatalf("round trip changed the layout")
	}
	var out2 bytes.Buffer
	if _, err := writerFor(t, g).WriteTo(&out2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out1.Bytes(), out2.Bytes()) {
		t.Fatal("writing the read-back file gives different bytes")
	}
}

func errorsAs(err error, target **FormatError) bool {
	fe, ok := err.(*FormatError)
	if ok {
		*target = fe
	}
	return ok
}

// FuzzParse fuzzes whole files.
func FuzzParse(f *testing.F) {
	f.Add(baseFile().bytes())
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, in []byte) { checkParsed(t, in) })
}

// metadataHeader is a header with no tensors and n pairs; FuzzMetadata
// appends the fuzzed pair bytes to it.
func metadataHeader(n byte) []byte {
	return cat([]byte(Magic), le32(3), le64(0), le64(uint64(n)))
}

// FuzzMetadata fuzzes the key/value section: the first byte is the pair
// count, the rest the encoded pairs.
func FuzzMetadata(f *testing.F) {
	kvs := cat(rawStr("general.architecture"), vStr("llama"), rawStr("n"), vArr(6, 2, le32(0), le32(1)))
	f.Add(append([]byte{2}, kvs...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		checkParsed(t, append(metadataHeader(in[0]), in[1:]...))
	})
}

// tensorHeader is a header with n tensors and one pair setting the
// alignment to 2^k; FuzzTensorInfos appends the fuzzed infos and data.
func tensorHeader(n, k byte) []byte {
	return cat([]byte(Magic), le32(3), le64(uint64(n)), le64(1), rawStr(AlignmentKey), vU32(1<<(k%8)))
}

// FuzzTensorInfos fuzzes the tensor infos and data section: byte 0 is the
// tensor count, byte 1 selects the alignment, the rest follows the header.
func FuzzTensorInfos(f *testing.F) {
	infos := cat(rawStr("a"), le32(1), le64(8), le32(uint32(F32)), le64(0),
		rawStr("b"), le32(1), le64(128), le32(uint32(Q1_0)), le64(32))
	hdr := tensorHeader(2, 5)
	in := cat([]byte{2, 5}, infos)
	for (len(hdr)+len(in)-2)%32 != 0 {
		in = append(in, 0)
	}
	f.Add(cat(in, make([]byte, 64)))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		checkParsed(t, append(tensorHeader(in[0], in[1]), in[2:]...))
	})
}

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the committed fuzz seed corpora in testdata/fuzz")

// TestWriteFuzzSeeds regenerates testdata/fuzz from the fixtures when run
// with -update-seeds; otherwise it checks the committed seeds still parse
// (or fail) without trouble.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*updateSeeds {
		for _, name := range []string{"FuzzParse", "FuzzMetadata", "FuzzTensorInfos"} {
			files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", name, "*"))
			if len(files) == 0 {
				t.Errorf("no committed seeds for %s", name)
			}
		}
		return
	}
	seeds := map[string][][]byte{}
	add := func(target, name string, b []byte) {
		seeds[target+"/"+name] = [][]byte{b}
	}

	base := baseFile().bytes()
	add("FuzzParse", "base", base)
	for _, cut := range []int{3, 20, 66, 130, 205, 245, 300} {
		add("FuzzParse", fmt.Sprintf("base-cut-%d", cut), base[:cut])
	}
	v2 := baseFile()
	v2.version = 2
	add("FuzzParse", "base-v2", v2.bytes())
	var all bytes.Buffer
	(&Writer{Alignment: 64, Metadata: Metadata{
		{"u8", uint8(1)}, {"i16", int16(-2)}, {"f64", 0.25}, {"b", true}, {"as", []string{"a", "bc"}},
		{"ai64", []int64{-4}}, {"af32", []float32{0.5}},
	}, Tensors: []WriterTensor{
		{"q1", []int64{128, 2}, Q1_0, Bytes(make([]byte, 36))},
		{"q2", []int64{64}, Q2_0, Bytes(make([]byte, 18))},
		{"k", []int64{256}, Q6_K, Bytes(make([]byte, 210))},
	}}).WriteTo(&all)
	add("FuzzParse", "mixed-types", all.Bytes())

	// A real file shrunk to its metadata and three small tensors.
	stories, err := Open(testkit.Stories(t, "stories260K-llamacpp.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer stories.Close()
	w := writerFor(t, stories)
	var keep []WriterTensor
	for i, wt := range w.Tensors {
		if stories.Tensors[i].Bytes() <= 1024 && len(keep) < 3 {
			keep = append(keep, wt)
		}
	}
	w.Tensors = keep
	var small bytes.Buffer
	w.WriteTo(&small)
	add("FuzzParse", "stories260K-3-tensors", small.Bytes())
	add("FuzzParse", "stories260K-header-cut", small.Bytes()[:4000])
	vocab, err := os.ReadFile(testkit.Vocab(t, "llama-spm"))
	if err != nil {
		t.Fatal(err)
	}
	add("FuzzParse", "vocab-llama-spm-head", vocab[:3000])

	// The metadata section of the real file, and of the mixed one.
	kvEnd := func(f *File, b []byte) int {
		var buf bytes.Buffer
		(&Writer{Metadata: f.Metadata}).WriteTo(&buf)
		return buf.Len()
	}
	sf, _ := parseBytes(small.Bytes())
	add("FuzzMetadata", "stories260K", append([]byte{byte(len(sf.Metadata))}, small.Bytes()[24:kvEnd(sf, small.Bytes())]...))
	mf, _ := parseBytes(all.Bytes())
	add("FuzzMetadata", "mixed-types", append([]byte{byte(len(mf.Metadata))}, all.Bytes()[24:kvEnd(mf, all.Bytes())]...))
	add("FuzzMetadata", "base", append([]byte{3}, base[24:168]...))

	// Tensor infos and data, re-padded for the fuzz header, whose length
	// differs from the original header's.
	infosLen := func(f *File) int {
		n := 0
		for _, t := range f.Tensors {
			n += 8 + len(t.Name) + 4 + 8*len(t.Dims) + 4 + 8
		}
		return n
	}
	tensorSeed := func(f *File, b []byte) []byte {
		end := kvEnd(f, b)
		infos := b[end : end+infosLen(f)]
		k := byte(bits.TrailingZeros64(uint64(f.Alignment)))
		hdr := tensorHeader(byte(len(f.Tensors)), k)
		out := cat([]byte{byte(len(f.Tensors)), k}, infos)
		for int64(len(hdr)+len(out)-2)%f.Alignment != 0 {
			out = append(out, 0)
		}
		return cat(out, b[f.DataOffset:])
	}
	add("FuzzTensorInfos", "stories260K-3-tensors", tensorSeed(sf, small.Bytes()))
	bf, _ := parseBytes(base)
	add("FuzzTensorInfos", "base", tensorSeed(bf, base))
	add("FuzzTensorInfos", "mixed-types", tensorSeed(mf, all.Bytes()))

	for key, vals := range seeds {
		dir := filepath.Join("testdata", "fuzz", filepath.Dir(key))
		os.MkdirAll(dir, 0o755)
		var b bytes.Buffer
		b.WriteString("go test fuzz v1\n")
		for _, v := range vals {
			b.WriteString("[]byte(" + strconv.Quote(string(v)) + ")\n")
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(key)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
