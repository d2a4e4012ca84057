package runtime

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/testkit"
)

func storiesPaths(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{
		"gguf": testkit.Stories(t, "stories260K-llamacpp.gguf"),
		"hf":   testkit.Stories(t, "hf"),
	}
}

// storiesPieces returns the vocabulary's token pieces from the GGUF.
func storiesPieces(t *testing.T) []string {
	f, err := gguf.Open(testkit.Stories(t, "stories260K-llamacpp.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, ok := f.Metadata.Strings("tokenizer.ggml.tokens")
	if !ok {
		t.Fatal("no tokenizer.ggml.tokens")
	}
	return p
}

// decodePieces turns ids into text like llama2.c's run.c: "▁" is a space,
// <0xXX> is a byte, and the space after BOS is dropped.
func decodePieces(pieces []string, ids []int32) string {
	var b strings.Builder
	for i, id := range ids {
		p := pieces[id]
		if len(p) == 6 && strings.HasPrefix(p, "<0x") && p[5] == '>' {
			if v, err := strconv.ParseUint(p[3:5], 16, 8); err == nil {
				b.WriteByte(byte(v))
				continue
			}
		}
		p = strings.ReplaceAll(p, "\u2581", " ")
		if i == 0 {
			p = strings.TrimPrefix(p, " ")
		}
		b.WriteString(p)
	}
	return b.String()
}

// TestStories260K: the GGUF and the HF form of stories260K reproduce the
// greedy output of llama2.c (and llama.cpp) from BOS.
func TestStories260K(t *testing.T) {
	want64 := readIDs(t, testkit.Stories(t, "greedy_ids_from_bos_first64.txt"))
	text, err := os.ReadFile(testkit.Stories(t, "greedy_t0_n256.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pieces := storiesPieces(t)
	for form, path := range storiesPaths(t) {
		t.Run(form, func(t *testing.T) {
			m, err := model.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, kv := range []bool{false, true} {
				// The GGUF says context 128 (the converter's default); the model has 512.
				storiesGreedy(t, newEngine(t, m, Options{Context: 512, KVF16: kv}), want64, string(text), pieces)
			}
		})
	}
}

func storiesGreedy(t *testing.T, e *Engine, want64 []int32, text string, pieces []string) {
	t.Helper()
	ctx := context.Background()
	got, err := e.Greedy(ctx, []int32{1}, 64)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want64 {
		if got[i] != want64[i] {
			t.Fatalf("id %d: got %d, want %d\ngot  %v\nwant %v", i, got[i], want64[i], got, want64)
		}
	}
	ids, err := e.Greedy(ctx, []int32{1}, 256)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := decodePieces(pieces, ids), strings.TrimSuffix(text, "\n"); g != w {
		t.Fatalf("256 tokens decode to\n%q\nwant\n%q", g, w)
	}
}

// TestStoriesPrompt: the prompt "Once upon a time" (BOS 403 407 261 378),
// prefilled in one batch, continues like the fixture.
func TestStoriesPrompt(t *testing.T) {
	want := readIDs(t, testkit.Stories(t, "greedy_ids_from_bos_first64.txt"))
	m, err := model.Open(storiesPaths(t)["gguf"])
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e := newEngine(t, m, Options{Threads: 3})
	got, err := e.Greedy(context.Background(), append([]int32{1}, want[:4]...), 60)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != want[4+i] {
			t.Fatalf("id %d: got %d, want %d", i, got[i], want[4+i])
		}
	}
}

func readIDs(t *testing.T, path string) []int32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skip("fixture not present:", err)
	}
	var ids []int32
	for _, f := range strings.Fields(string(b)) {
		v, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ids = append(ids, int32(v))
	}
	return ids
}
