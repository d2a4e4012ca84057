package tokenizer

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/testkit"
)

// vocabPath is llama.cpp's test vocabulary ggml-vocab-name.gguf; its tests
// are the same path plus ".inp" and ".out".
func vocabPath(tb testing.TB, name string) string { return testkit.Vocab(tb, name) }

func storiesPath(tb testing.TB, name string) string { return testkit.Stories(tb, name) }

// loaded caches each fixture vocabulary once per test binary: the files
// are megabytes and several tests and benchmarks share them.
var loaded struct {
	sync.Mutex
	m map[string]*loadedVocab
}

type loadedVocab struct {
	once sync.Once
	tok  *Tokenizer
	md   gguf.Metadata
	err  error
}

func loadGGUF(tb testing.TB, path string) (*Tokenizer, gguf.Metadata) {
	tb.Helper()
	loaded.Lock()
	if loaded.m == nil {
		loaded.m = map[string]*loadedVocab{}
	}
	l := loaded.m[path]
	if l == nil {
		l = new(loadedVocab)
		loaded.m[path] = l
	}
	loaded.Unlock()
	l.once.Do(func() {
		f, err := gguf.Open(path)
		if err != nil {
			l.err = err
			return
		}
		defer f.Close()
		l.md = f.Metadata // decoded copies, valid after Close
		v, err := FromGGUF(l.md)
		if err != nil {
			l.err = err
			return
		}
		l.tok, l.err = New(v)
	})
	if l.err != nil {
		tb.Fatalf("load %s: %v", path, l.err)
	}
	return l.tok, l.md
}

// testPair is one llama.cpp tokenizer test: text and the HF token ids.
type testPair struct {
	text string
	ids  []int32
}

func readPairs(t *testing.T, name string) []testPair {
	t.Helper()
	inp, err := os.ReadFile(vocabPath(t, name) + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(vocabPath(t, name) + ".out")
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	if texts[len(texts)-1] == "" {
		texts = texts[:len(texts)-1]
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d texts but %d id lines", name, len(texts), len(lines))
	}
	pairs := make([]testPair, len(texts))
	for i, text := range texts {
		pairs[i].text = text
		for _, f := range strings.Fields(lines[i]) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", name, i+1, err)
			}
			pairs[i].ids = append(pairs[i].ids, int32(id))
		}
	}
	return pairs
}
