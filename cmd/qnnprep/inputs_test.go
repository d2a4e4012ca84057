package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/testkit"
)

// A vocabulary that does not fit the model's embedding is refused by the
// command that brings the two together, before anything is written, with
// the file and the key named once.
func TestVocabularyMustFitEmbedding(t *testing.T) {
	hf := fixture(t, "stories260K/hf") // 512 embedding rows, no tokenizer files
	withTok := filepath.Join(t.TempDir(), "hf")
	os.MkdirAll(withTok, 0o755)
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(hf, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(withTok, f), b, 0o644)
	}
	// An added token with id 520 makes 521 ids for 512 rows.
	os.WriteFile(filepath.Join(withTok, "tokenizer.json"), []byte(`{"version":"1.0",
		"added_tokens":[{"id":520,"content":"<|extra|>","special":true}],
		"normalizer":null,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},
		"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`), 0o644)
	// llama.cpp's gpt-2 vocabulary comes with the peers; only its case needs it.
	var gpt2 string
	for _, c := range []struct {
		name string
		args func(t testing.TB, out string) []string
		want func() []string
	}{
		{"convert --vocab with another model's vocabulary", func(t testing.TB, out string) []string {
			gpt2 = testkit.Vocab(t, "gpt-2")
			return []string{"convert", "--to", "gguf", "-q", hf, out, "--vocab", gpt2}
		}, func() []string {
			return []string{"--vocab " + gpt2, "key tokenizer.ggml.tokens: a vocabulary of 50257 tokens (ids 0..50256) for an embedding of 512 rows"}
		}},
		{"convert with a tokenizer.json added token past the rows", func(t testing.TB, out string) []string {
			return []string{"convert", "--to", "gguf", "-q", withTok, out}
		}, func() []string {
			return []string{filepath.Join(withTok, "tokenizer.json"), "a vocabulary of 521 tokens (ids 0..520) for an embedding of 512 rows"}
		}},
		{"quantize with a tokenizer.json added token past the rows", func(t testing.TB, out string) []string {
			return []string{"quantize", withTok, out, "--recipe", "q8_0"}
		}, func() []string { return []string{filepath.Join(withTok, "tokenizer.json"), "521 tokens"} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out.gguf")
			args := c.args(t, out)
			var code int
			msg := captureStderr(t, func() { code = run(args) })
			if code == 0 {
				t.Fatal("accepted")
			}
			for _, w := range c.want() {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "tokenizer: tokenizer:") {
				t.Errorf("doubled prefix: %q", msg)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left behind: %v", ents)
			}
		})
	}
}

// sparsify says what a head sparsity rounded to: 0.25 of the 2 query heads
// per KV group of stories260K is half a head, and whole heads go.
func TestSparsifyHeadRounding(t *testing.T) {
	out := filepath.Join(t.TempDir(), "h.gguf")
	var code int
	stdout := captureStdout(t, func() {
		code = run([]string{"sparsify", fixture(t, "stories260K/stories260K-llamacpp.gguf"), out, "--pattern", "head", "--sparsity", "0.25", "--steps", "4", "-t", "1"})
	})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stdout)
	}
	if !strings.Contains(stdout, "note: sparsity 0.25 of 2 query heads per KV group is 0.5; removed 1 (0.5000)") {
		t.Errorf("no note on the rounding:\n%s", stdout)
	}
}
