package tokenizer

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// roundTrips reports whether Decode(Encode(s)) == s is guaranteed for the
// vocabulary, and returns the text Decode should give back: NFC-normalising
// vocabularies return the NFC form, and an SPM vocabulary cannot tell a
// U+2581 in the text from a space.
func expectedDecode(tok *Tokenizer, s string) (string, bool) {
	v := tok.Vocab()
	if v.Model == ModelSPM && strings.Contains(s, "▁") {
		return "", false
	}
	if v.Model == ModelBPE && tok.pre.nfc {
		return norm.NFC.String(s), true
	}
	return s, true
}

func TestFixtureRoundTrip(t *testing.T) {
	for _, name := range fixtureVocabs {
		t.Run(name, func(t *testing.T) {
			tok, _ := loadGGUF(t, vocabPath(t, name))
			for i, p := range readPairs(t, name) {
				for _, s := range []string{p.text, "<s>" + p.text + "</s>", p.text + "<|endoftext|>" + p.text} {
					want, ok := expectedDecode(tok, s)
					if !ok {
						continue
					}
					if got := tok.Decode(tok.Encode(s, false)); got != want {
						t.Errorf("test %d: Decode(Encode(%q)) = %q", i, s, got)
					}
					if got := tok.Decode(tok.EncodeWith(s, false, false)); got != want {
						t.Errorf("test %d: Decode(EncodeWith(%q, parseSpecial=false)) = %q", i, s, got)
					}
				}
			}
		})
	}
}

// Writing a vocabulary as GGUF keys and reading it back gives the same vocabulary.
func TestGGUFMetadataRoundTrip(t *testing.T) {
	for _, name := range []string{"qwen2", "llama-spm", "gpt-2"} {
		t.Run(name, func(t *testing.T) {
			tok, md := loadGGUF(t, vocabPath(t, name))
			v := tok.Vocab()
			back, err := FromGGUF(v.GGUFMetadata())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, v) {
				t.Errorf("FromGGUF(GGUFMetadata()) differs:\n%+v\n%+v", summary(back), summary(v))
			}
			// Every tokenizer.* key of the file is written again with its value.
			out := v.GGUFMetadata()
			for _, kv := range md {
				if !strings.HasPrefix(kv.Key, "tokenizer.") {
					continue
				}
				got, ok := out.Get(kv.Key)
				if !ok || !reflect.DeepEqual(got, kv.Value) {
					t.Errorf("key %s: wrote %T %v, file has %T", kv.Key, got, ok, kv.Value)
				}
			}
		})
	}
}

func summary(v *Vocab) string {
	c := *v
	c.Tokens, c.Scores, c.Types, c.Merges = nil, nil, nil, nil
	return fmt.Sprintf("%+v (%d tokens, %d merges)", c, len(v.Tokens), len(v.Merges))
}
