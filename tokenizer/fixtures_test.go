package tokenizer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
)

const fixtures = "../../shared/fixtures"

func vocabPath(name string) string {
	return filepath.Join(fixtures, "tokenizer-vocab", "ggml-vocab-"+name+".gguf")
}

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
		if os.IsNotExist(l.err) {
			tb.Skipf("fixture missing: %v", l.err)
		}
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
	inp, err := os.ReadFile(vocabPath(name) + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(vocabPath(name) + ".out")
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
