package tokenizer

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// The llama.cpp tokenizer test vocabularies: every .inp/.out pair must
// encode to exactly the ids Hugging Face's tokenizer gave.
var fixtureVocabs = []string{
	"qwen2", "qwen35", "llama-bpe", "llama-spm", "phi-3", "gpt-2",
	"mpt", "falcon", "starcoder", "refact", "deepseek-coder",
}

func TestFixtureEncode(t *testing.T) {
	for _, name := range fixtureVocabs {
		t.Run(name, func(t *testing.T) {
			tok, _ := loadGGUF(t, vocabPath(t, name))
			for i, p := range readPairs(t, name) {
				got := tok.Encode(p.text, false)
				if !slices.Equal(got, p.ids) {
					t.Errorf("test %d %q:\n got %v\nwant %v\n got pieces %q\nwant pieces %q", i, p.text, got, p.ids, pieces(tok, got), pieces(tok, p.ids))
				}
			}
		})
	}
}

func pieces(tok *Tokenizer, ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if tok.Validate(id) != nil {
			out[i] = fmt.Sprint("#", id)
			continue
		}
		out[i] = tok.Vocab().Tokens[id]
	}
	return out
}

// A Tokenizer is shared by goroutines (run with -race).
func TestConcurrentEncode(t *testing.T) {
	tok, _ := loadGGUF(t, vocabPath(t, "qwen2"))
	pairs := readPairs(t, "qwen2")
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(pairs))
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, p := range pairs {
				if got := tok.Encode(p.text, false); !slices.Equal(got, p.ids) {
					errs <- fmt.Sprintf("test %d: got %v", i, got)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
