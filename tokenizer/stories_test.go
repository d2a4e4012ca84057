package tokenizer

import (
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func loadTok512(t *testing.T) *Tokenizer {
	t.Helper()
	v, err := FromLlama2c(storiesPath(t, "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestLlama2cEncode(t *testing.T) {
	tok := loadTok512(t)
	if got, want := tok.Encode("Once upon a time", false), []int32{403, 407, 261, 378}; !slices.Equal(got, want) {
		t.Errorf("Encode without BOS = %v, want %v", got, want)
	}
	// llama.cpp and run.c both prepend BOS = 1.
	if got, want := tok.Encode("Once upon a time", true), []int32{1, 403, 407, 261, 378}; !slices.Equal(got, want) {
		t.Errorf("Encode with BOS = %v, want %v", got, want)
	}
	if tok.Len() != 512 {
		t.Errorf("Len = %d, want 512", tok.Len())
	}
}

// The greedy ids from BOS decode to run.c's output for the same ids (run.c
// drops the space of the first piece after BOS; the file ends with the
// newline run.c prints at the end).
func TestLlama2cDecodeGreedy(t *testing.T) {
	tok := loadTok512(t)
	ids := readIDs(t, storiesPath(t, "greedy_ids_from_bos_first64.txt"))
	if len(ids) != 64 {
		t.Fatalf("%d ids, want 64", len(ids))
	}
	want, err := os.ReadFile(storiesPath(t, "greedy_t0_n64_once_upon_a_time.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Decode(ids); got != strings.TrimSuffix(string(want), "\n") {
		t.Errorf("Decode = %q\nwant %q", got, want)
	}
	// With BOS in front, BOS shows as its text and the space after it goes.
	if got := tok.Decode(append([]int32{1}, ids[:4]...)); got != "<s>Once upon a time" {
		t.Errorf("Decode(BOS ...) = %q", got)
	}
	if got := tok.Piece(403); got != " Once" {
		t.Errorf("Piece(403) = %q, want %q", got, " Once")
	}
	if got := tok.Piece(13); got != "\n" {
		t.Errorf("Piece(13) = %q, want newline", got)
	}
}

func readIDs(t *testing.T, path string) []int32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, int32(n))
	}
	return ids
}

// llama.cpp's own llama2.c converter built the stories GGUF's vocabulary
// from tok512.bin: FromLlama2c must produce the same tokens, scores and
// types, and both must tokenize alike.
func TestLlama2cMatchesGGUF(t *testing.T) {
	l2c := loadTok512(t)
	gg, md := loadGGUF(t, storiesPath(t, "stories260K-llamacpp.gguf"))
	a, b := l2c.Vocab(), gg.Vocab()
	if !slices.Equal(a.Tokens, b.Tokens) {
		for i := range min(len(a.Tokens), len(b.Tokens)) {
			if a.Tokens[i] != b.Tokens[i] {
				t.Errorf("token %d: %q, gguf %q", i, a.Tokens[i], b.Tokens[i])
			}
		}
		t.Fatalf("tokens differ (%d vs %d)", len(a.Tokens), len(b.Tokens))
	}
	if !slices.Equal(a.Scores, b.Scores) {
		t.Error("scores differ")
	}
	if !slices.Equal(a.Types, b.Types) {
		t.Errorf("types differ:\n%v\n%v", a.Types[:10], b.Types[:10])
	}
	if a.BOS != b.BOS || a.EOS != b.EOS || a.UNK != b.UNK || a.AddBOS != b.AddBOS || a.AddSpacePrefix != b.AddSpacePrefix {
		t.Errorf("specials differ: llama2c %+v, gguf %+v", *a, *b)
	}
	for _, s := range []string{"Once upon a time", "Lily and Ben went to the park.\nThey saw a dog!", " x  y ", "ünïcödé 日本"} {
		if x, y := l2c.Encode(s, true), gg.Encode(s, true); !slices.Equal(x, y) {
			t.Errorf("%q: llama2c %v, gguf %v", s, x, y)
		}
	}
	// The vocabulary keys we would write carry the same values as the
	// converter's (it writes no add_* flags and no merges).
	mine := a.GGUFMetadata()
	for _, k := range []string{keyModel, keyTokens, keyScores, keyTypes, keyBOS, keyEOS, keyUNK} {
		x, _ := mine.Get(k)
		y, ok := md.Get(k)
		if !ok || !reflect.DeepEqual(x, y) {
			t.Errorf("%s: ours %T, gguf %T (equal=%v)", k, x, y, reflect.DeepEqual(x, y))
		}
	}
}
