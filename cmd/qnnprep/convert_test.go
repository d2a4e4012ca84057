package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/testkit"
)

// fixture is testdata/rel at the repository's root (testkit.Path).
func fixture(t testing.TB, rel string) string { return testkit.Path(t, rel) }

func readIDs(t *testing.T, path string) []int32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, f := range strings.Fields(string(b)) {
		v, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, int32(v))
	}
	return ids
}

// convertStories converts the stories260K HF fixture (no tokenizer files)
// with the llama2.c vocabulary, as a user would.
func convertStories(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "stories260K.gguf")
	if code := run([]string{"convert", "--to", "gguf", "-q", fixture(t, "stories260K/hf"), out,
		"--vocab", fixture(t, "stories260K/tok512.bin")}); code != 0 {
		t.Fatalf("convert exited %d", code)
	}
	return out
}

func TestConvertStoriesDecodesInLlamaCpp(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	out := convertStories(t)
	want := readIDs(t, fixture(t, "stories260K/greedy_ids_from_bos_first64.txt"))[:60]
	got, err := peers.LlamaGreedy(out, []int32{1}, 60, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("llama.cpp greedy from BOS on the converted GGUF:\n got %v\nwant %v", got, want)
	}
}

func TestConvertStoriesParsesInHuggingFaceGGUF(t *testing.T) {
	testkit.Need(t, peers.HFGGUF)
	out := convertStories(t)
	m, err := model.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := inspectModel(m)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := peers.GGUFTensors(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(theirs) != len(info.Tensors) {
		t.Fatalf("@huggingface/gguf lists %d tensors, inspect %d", len(theirs), len(info.Tensors))
	}
	for i, tt := range theirs {
		mine := info.Tensors[i]
		if tt.Name != mine.Name || gguf.Type(tt.Type).String() != mine.Type || !reflect.DeepEqual(tt.Dims, mine.Dims) {
			t.Errorf("tensor %d: @huggingface/gguf %s %s %v, inspect %s %s %v", i, tt.Name, gguf.Type(tt.Type), tt.Dims, mine.Name, mine.Type, mine.Dims)
		}
	}
}

func TestConvertIsLosslessAndDeterministic(t *testing.T) {
	a, b := convertStories(t), convertStories(t)
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if string(ab) != string(bb) {
		t.Fatal("two conversions of the same input differ")
	}
	src, err := model.Open(fixture(t, "stories260K/hf"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := model.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if len(src.Tensors) != len(dst.Tensors) {
		t.Fatalf("%d tensors in, %d out", len(src.Tensors), len(dst.Tensors))
	}
	for i, st := range src.Tensors {
		dt := dst.Tensors[i]
		sb, _ := st.Data()
		db, _ := dt.Data()
		if st.Name != dt.Name || st.Type != dt.Type || string(sb) != string(db) {
			t.Errorf("tensor %s changed in conversion", st.Name)
		}
	}
}
