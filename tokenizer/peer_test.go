package tokenizer

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/testkit"
	"golang.org/x/text/unicode/norm"
)

// llamaTokenize tokenizes texts with llama.cpp through node-llama-cpp
// (llama_tokenize with add_special=false), with parse_special false and true.
func llamaTokenize(t *testing.T, model string, texts []string, nVocab int) (plain, special [][]int32, text []string, eog []int32) {
	t.Helper()
	nm, err := peers.NodeModules()
	if err != nil {
		t.Fatal(err)
	}
	req, err := json.Marshal(map[string]any{"node_modules": nm, "model": model, "texts": texts, "n_vocab": nVocab})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "testdata/llamacpp_tokenize.mjs")
	cmd.Stdin = bytes.NewReader(req)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("node llamacpp_tokenize.mjs %s: %v\n%s", model, err, stderr.String())
	}
	var reply struct {
		Plain, Special [][]int32
		Text           []string
		EOG            []int32
	}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if s, ok := strings.CutPrefix(l, "QNNPREP-RESULT "); ok {
			if err := json.Unmarshal([]byte(s), &reply); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(reply.Plain) != len(texts) || len(reply.Special) != len(texts) {
		t.Fatalf("llama.cpp gave %d/%d results for %d texts\n%s", len(reply.Plain), len(reply.Special), len(texts), stderr.String())
	}
	return reply.Plain, reply.Special, reply.Text, reply.EOG
}

// peerTexts are the fixture's test strings and generated ones mixing
// letters, digits, punctuation, whitespace runs, contractions, marks, CJK,
// emoji and special-token text.
func peerTexts(t *testing.T, name string, specials []string) []string {
	var texts []string
	if slices.Contains(fixtureVocabs, name) { // not stories260K or llama2c
		inp, err := os.ReadFile(vocabPath(t, name) + ".inp")
		if err != nil {
			t.Fatal(err)
		}
		texts = strings.Split(strings.TrimSuffix(string(inp), "\n__ggml_vocab_test__\n"), "\n__ggml_vocab_test__\n")
	}
	pool := []string{"Hello", "world", " the", "I", "'s", "'LL", "'ve", "don't", "123", "4567890", "3.14", " ", "  ", "   ",
		"\n", "\n\n", "\t", " \n ", "\r\n", "!", "?!", "...", "(", ")", "=>", "{", "}", "--", "«", "»", "—", "é", "e\u0301",
		"ñ", "ü", "Ω", "Ж", "日本語", "中文", "한국어", "🦙", "👍🏽", "\u00a0", "\u3000", "\u2581", "x", "ab", "<", ">", "|", "_",
		"\"", "`", "#", "$", "%", "²", "½", "٣", "ǅ", "ß", "İ", "ﬁ"}
	pool = append(pool, specials...)
	r := rand.New(rand.NewSource(int64(len(name))))
	for range 200 {
		var b strings.Builder
		for range 1 + r.Intn(12) {
			b.WriteString(pool[r.Intn(len(pool))])
		}
		texts = append(texts, b.String())
	}
	return texts
}

// Our ids equal llama.cpp's for every fixture vocabulary, with and without
// special-token parsing, except where the package documents a deliberate
// difference (NFC for qwen2/mpt: non-NFC texts are left out there).
func TestLlamaCppPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node once per vocabulary")
	}
	testkit.Need(t, peers.NodeLlamaCpp)
	names := append([]string{}, fixtureVocabs...)
	for _, name := range append(names, "stories260K") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var path string
			if name == "stories260K" {
				path = storiesPath(t, "stories260K-llamacpp.gguf")
			} else {
				path = vocabPath(t, name)
			}
			tok, _ := loadGGUF(t, path)
			var specials []string
			for _, id := range tok.special {
				if len(specials) < 12 {
					specials = append(specials, tok.v.Tokens[id])
				}
			}
			var texts []string
			for _, s := range peerTexts(t, name, specials) {
				if tok.v.Model == ModelBPE && tok.pre.nfc && !norm.NFC.IsNormalString(s) {
					continue
				}
				texts = append(texts, s)
			}
			plain, parsed, detok, eog := llamaTokenize(t, path, texts, tok.Len())
			if got := tok.EOG(); !slices.Equal(got, eog) {
				t.Errorf("EOG = %v, llama.cpp %v", got, eog)
			}
			// Decode is llama_detokenize (special tokens rendered) where
			// llama.cpp neither cleans up spaces nor strips SPM prefixes
			// (see the package doc for the others).
			if name == "qwen2" || name == "qwen35" || name == "deepseek-coder" {
				for i, ids := range parsed {
					if got := tok.Decode(ids); got != detok[i] {
						t.Errorf("Decode(%v) = %q, llama_detokenize %q", ids, got, detok[i])
					}
				}
			}
			for _, special := range []bool{false, true} {
				want := plain
				if special {
					want = parsed
				}
				bad := 0
				for i, s := range texts {
					got := tok.EncodeWith(s, false, special)
					if !slices.Equal(got, want[i]) {
						if bad++; bad <= 5 {
							t.Errorf("parse_special=%v %q:\n ours     %v %q\n llama.cpp %v %q", special, s, got, pieces(tok, got), want[i], pieces(tok, want[i]))
						}
					}
				}
				if bad > 0 {
					t.Errorf("parse_special=%v: %d of %d texts differ", special, bad, len(texts))
				}
			}
		})
	}
}

// Vocabularies written with GGUFMetadata load in llama.cpp and tokenize
// there exactly as here: the llama2.c vocab (SPM, from tok512.bin) and a
// byte-level BPE vocab read from a tokenizer.json (FromHF). The other keys
// llama.cpp needs to load a vocab-only file come from the fixture GGUFs.
func TestGGUFMetadataLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	testkit.Need(t, peers.NodeLlamaCpp)
	_, storiesMD := loadGGUF(t, storiesPath(t, "stories260K-llamacpp.gguf"))
	qwen, qwenMD := loadGGUF(t, vocabPath(t, "qwen2"))
	l2c, err := FromLlama2c(storiesPath(t, "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	hf, err := FromHF(writeHFDir(t, qwen.Vocab(), true))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		v     *Vocab
		model gguf.Metadata
	}{{"llama2c", l2c, storiesMD}, {"hf-qwen2", hf, qwenMD}} {
		t.Run(c.name, func(t *testing.T) {
			var md gguf.Metadata
			for _, kv := range c.model {
				if !strings.HasPrefix(kv.Key, "tokenizer.") {
					md = append(md, kv)
				}
			}
			md = append(md, c.v.GGUFMetadata()...)
			path := filepath.Join(t.TempDir(), "vocab.gguf")
			if err := gguf.WriteFile(path, &gguf.Writer{Metadata: md}); err != nil {
				t.Fatal(err)
			}
			tok, err := New(c.v)
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			for _, s := range peerTexts(t, "qwen2", []string{"<s>", "</s>", "<|im_start|>", "<|endoftext|>", "<|im_end|>", "<eos>", "<|end|>"}) {
				if c.v.Model == ModelBPE && tok.pre.nfc && !norm.NFC.IsNormalString(s) {
					continue
				}
				texts = append(texts, s)
			}
			plain, parsed, _, _ := llamaTokenize(t, path, texts, 0)
			for i, s := range texts {
				if got := tok.EncodeWith(s, false, false); !slices.Equal(got, plain[i]) {
					t.Errorf("%q: ours %v, llama.cpp %v", s, got, plain[i])
				}
				if got := tok.EncodeWith(s, false, true); !slices.Equal(got, parsed[i]) {
					t.Errorf("%q (parse_special): ours %v, llama.cpp %v", s, got, parsed[i])
				}
			}
		})
	}
}
