package tokenizer

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/testkit"
	"golang.org/x/text/unicode/norm"
)

// hfCase is a vocabulary written as tokenizer.json and the texts its
// encoding is checked on.
type hfCase struct {
	name  string
	tok   *Tokenizer // the vocabulary's own tokenizer, which agrees with llama.cpp (TestLlamaCppPeer)
	pairs []testPair // llama.cpp's test texts and ids, none for llama2.c
	texts []string   // the pairs' texts, then generated ones
	path  string     // the written tokenizer.json
}

// hfCases writes tokenizer.json for every fixture vocabulary and for the
// llama2.c tok512.bin.
func hfCases(t *testing.T) []*hfCase {
	var cases []*hfCase
	for _, name := range append(slices.Clone(fixtureVocabs), "llama2c") {
		c := &hfCase{name: name}
		if name == "llama2c" {
			c.tok = loadTok512(t)
		} else {
			c.tok, _ = loadGGUF(t, vocabPath(t, name))
			c.pairs = readPairs(t, name)
		}
		for _, p := range c.pairs {
			c.texts = append(c.texts, p.text)
		}
		var specials []string
		for _, id := range c.tok.special {
			if len(specials) < 12 {
				specials = append(specials, c.tok.v.Tokens[id])
			}
		}
		for _, s := range peerTexts(t, name, specials)[len(c.pairs):] {
			// The NFC-normalising pre-tokenizers differ from llama.cpp there (package doc).
			if c.tok.pre != nil && c.tok.pre.nfc && !norm.NFC.IsNormalString(s) {
				continue
			}
			// An lstrip/rstrip token takes C isspace whitespace in
			// llama.cpp and Unicode whitespace in Hugging Face's (Phi-3).
			if (c.tok.lstrip != nil || c.tok.rstrip != nil) && strings.ContainsFunc(s, func(r rune) bool {
				return r > 0x7f && unicode.IsSpace(r)
			}) {
				continue
			}
			c.texts = append(c.texts, s)
		}
		c.path = writeHF(t, c.tok.Vocab())
		cases = append(cases, c)
	}
	return cases
}

// writeHF writes v's tokenizer.json into a new directory and returns its path.
func writeHF(t *testing.T, v *Vocab) string {
	t.Helper()
	data, err := WriteHF(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// check compares ids from another tokenizer with llama.cpp's test ids and
// with this package's own encoding, without and with special tokens added.
func (c *hfCase) check(t *testing.T, who string, plain, special [][]int32) {
	t.Helper()
	for _, add := range []bool{false, true} {
		got := plain
		if add {
			got = special
		}
		bad := 0
		for i, s := range c.texts {
			want := c.tok.Encode(s, add)
			if i < len(c.pairs) && !add {
				want = c.pairs[i].ids
			}
			if !slices.Equal(got[i], want) {
				if bad++; bad <= 3 {
					t.Errorf("%s, add special %v, %q:\n got  %v\n want %v", who, add, s, got[i], want)
				}
			}
		}
		t.Logf("%s %s, add special %v: %d of %d texts match (%d with llama.cpp's ids)", c.name, who, add, len(c.texts)-bad, len(c.texts), len(c.pairs))
	}
}

// The tokenizer.json written for each vocabulary, read back by FromHF,
// encodes like the vocabulary itself: llama.cpp's test ids and the same
// ids on generated texts, BOS added where the vocabulary adds it.
func TestWriteHFReadBack(t *testing.T) {
	for _, c := range hfCases(t) {
		t.Run(c.name, func(t *testing.T) {
			v, err := FromHF(filepath.Dir(c.path))
			if err != nil {
				t.Fatal(err)
			}
			back, err := New(v)
			if err != nil {
				t.Fatal(err)
			}
			var plain, special [][]int32
			for _, s := range c.texts {
				plain = append(plain, back.Encode(s, false))
				special = append(special, back.Encode(s, true))
			}
			c.check(t, "FromHF", plain, special)
		})
	}
}

// Tokenizers.js (@huggingface/tokenizers), an independent implementation
// loading only the written tokenizer.json, encodes every test text to the
// ids llama.cpp's tests expect and generated texts as this package does,
// BOS added where the vocabulary adds it.
func TestWriteHFPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node once per vocabulary")
	}
	testkit.Need(t, peers.HFTokenizers)
	for _, c := range hfCases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			plain, special, err := peers.HFTokenize(c.path, c.texts)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, "tokenizers.js", plain, special)
		})
	}
}

// The same vocabulary gives the same bytes.
func TestWriteHFDeterministic(t *testing.T) {
	tok, _ := loadGGUF(t, vocabPath(t, "llama-spm"))
	a, err := WriteHF(tok.Vocab())
	if err != nil {
		t.Fatal(err)
	}
	b, err := WriteHF(tok.Vocab())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two writes of one vocabulary differ")
	}
}

func TestWriteHFErrors(t *testing.T) {
	base := func() *Vocab {
		return &Vocab{Model: ModelBPE, Pre: "gpt-2", Tokens: []string{"a", "b", "ab"}, Merges: []string{"a b"}, BOS: -1, EOS: -1, UNK: -1, PAD: -1}
	}
	for _, c := range []struct {
		name string
		edit func(v *Vocab)
	}{
		{"invalid UTF-8", func(v *Vocab) { v.Tokens[1] = "\xff" }},
		{"no model", func(v *Vocab) { v.Model = "" }},
	} {
		v := base()
		c.edit(v)
		if _, err := WriteHF(v); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, err := WriteHF(base()); err != nil {
		t.Errorf("valid vocab: %v", err)
	}
}
