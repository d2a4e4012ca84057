package pipeline

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit"
	"github.com/qnnprep/qnnprep/tokenizer"
)

var tok512 = testkit.File("stories260K/tok512.bin")

// MakeBundleTokenizer copies a Hugging Face tokenizer.json, writes one
// from any other vocabulary (a file or the model's own keys) that encodes
// like it, and fails, naming ErrNoTokenizer, without one.
func TestMakeBundleTokenizer(t *testing.T) {
	if _, err := os.Stat(tok512); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	vocabMD, err := synth.VocabMetadata(512)
	if err != nil {
		t.Fatal(err)
	}
	ggufPath, _ := synthLlama(t)
	l2c, err := tokenizer.FromLlama2c(tok512, 512)
	if err != nil {
		t.Fatal(err)
	}
	hfJSON, err := tokenizer.WriteHF(l2c)
	if err != nil {
		t.Fatal(err)
	}
	hfDir := t.TempDir()
	hfFile := filepath.Join(hfDir, "tokenizer.json")
	if err := os.WriteFile(hfFile, hfJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		path      string
		md        gguf.Metadata
		vocabSize int
		copy      string // want a copy of this file
		tokens    int    // or a written tokenizer.json of this many tokens
		eog       []int32
		err       string // or this error
	}{
		{name: "model's keys", md: vocabMD, vocabSize: 512, tokens: 512, eog: []int32{2}},
		{name: "llama2c file", path: tok512, md: vocabMD, vocabSize: 512, tokens: 512},
		{name: "gguf file", path: ggufPath, vocabSize: 512, tokens: 512},
		{name: "tokenizer.json", path: hfFile, copy: hfFile},
		{name: "HF directory", path: hfDir, copy: hfFile},
		{name: "none", md: gguf.Metadata{{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)}}, err: ErrNoTokenizer.Error()},
		{name: "larger than the model", path: ggufPath, vocabSize: 300, err: "more than the model's 300"},
		{name: "missing file", path: filepath.Join(hfDir, "nope.bin"), err: "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bt, err := MakeBundleTokenizer(c.path, c.md, c.vocabSize, []string{"Once upon a time"})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				if c.err == ErrNoTokenizer.Error() && !errors.Is(err, ErrNoTokenizer) {
					t.Errorf("%v does not wrap ErrNoTokenizer", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if bt.Copy != c.copy || (c.copy != "") != (bt.JSON == nil) {
				t.Fatalf("copy %q with %d bytes written, want copy %q", bt.Copy, len(bt.JSON), c.copy)
			}
			if c.copy != "" {
				return
			}
			v, err := tokenizer.ParseHF(bt.JSON)
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Tokens) != c.tokens || !v.AddBOS || v.BOS != 1 {
				t.Errorf("written tokenizer.json: %d tokens, AddBOS %v, BOS %d", len(v.Tokens), v.AddBOS, v.BOS)
			}
			if c.eog != nil && !slices.Equal(bt.EOG, c.eog) {
				t.Errorf("EOG %v, want %v", bt.EOG, c.eog)
			}
		})
	}
}

// A source with no tokenizer at all fails before anything is quantized,
// naming the flag that supplies one; given that flag, the bundle carries a
// tokenizer.json written from it and the qmodel the same vocabulary.
func TestBuildTokenizer(t *testing.T) {
	if _, err := os.Stat(tok512); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	src := filepath.Join(t.TempDir(), "hf")
	if err := synth.WriteHF(src, synth.Config(model.Llama, true), 3, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	o := options(t, src, out, "q1")
	_, err := Build(context.Background(), o)
	if !errors.Is(err, ErrNoTokenizer) || !strings.Contains(err.Error(), "--tokenizer") {
		t.Fatalf("error %v, want ErrNoTokenizer naming --tokenizer", err)
	}
	if _, err := os.Stat(filepath.Join(out, WorkDir, QModelName)); err == nil {
		t.Error("qmodel written although the build had no tokenizer")
	}

	o.Tokenizer, o.NoVerify = tok512, true
	res, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(res.Bundle, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	l2c, err := tokenizer.FromLlama2c(tok512, 512)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tokenizer.WriteHF(l2c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Error("bundle tokenizer.json is not the one written from --tokenizer's vocabulary")
	}
	qm, err := model.Open(res.QModel)
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Close()
	qv, err := tokenizer.FromGGUF(qm.Metadata)
	if err != nil {
		t.Fatalf("qmodel vocabulary: %v", err)
	}
	if !slices.Equal(qv.Tokens, l2c.Tokens) {
		t.Error("qmodel vocabulary differs from --tokenizer's")
	}
}

// A chat vocabulary's end-of-turn token ends generation on the device too:
// the bundle tokenizer's EOG (genie_config.json's eos-token) holds Qwen2's
// <|endoftext|> and <|im_end|>.
func TestBundleTokenizerEOG(t *testing.T) {
	path := testkit.Vocab(t, "qwen2")
	bt, err := MakeBundleTokenizer(path, nil, 151936, []string{"<|im_start|>user\nHello<|im_end|>\n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{151643, 151645} {
		if !slices.Contains(bt.EOG, id) {
			t.Errorf("EOG %v lacks %d", bt.EOG, id)
		}
	}
}
