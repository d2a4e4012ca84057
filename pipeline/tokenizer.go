package pipeline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// ErrNoTokenizer says that no tokenizer.json could be found or made for
// the bundle.
var ErrNoTokenizer = errors.New("no tokenizer for the bundle")

// BundleTokenizer is the bundle's tokenizer.json: a Hugging Face file to
// copy, or one written from a vocabulary.
type BundleTokenizer struct {
	Copy  string           // a tokenizer.json to copy as it is
	JSON  []byte           // or the tokenizer.json written from Vocab
	Vocab *tokenizer.Vocab // the vocabulary JSON was written from
	From  string           // where the tokenizer came from, for people
	// EOG are the ids that end generation (llama.cpp's rule: EOS, EOT,
	// <|im_end|>, ...), for genie_config.json's eos-token; nil when a
	// copied tokenizer.json is not one this package reads.
	EOG []int32
}

// MakeBundleTokenizer finds or makes the bundle's tokenizer.json for a
// model (its metadata md and vocabulary size), in this order: path, when
// it is a tokenizer.json or a directory holding one, is copied; any other
// vocabulary file at path (a GGUF, a llama2.c tokenizer.bin) is written as
// tokenizer.json; without a path, the tokenizer.ggml.* keys in md are.
// The written file is read back and must encode texts id for id like the
// vocabulary itself. Without any vocabulary the error wraps ErrNoTokenizer.
func MakeBundleTokenizer(path string, md gguf.Metadata, vocabSize int, texts []string) (*BundleTokenizer, error) {
	var v *tokenizer.Vocab
	var from string
	switch {
	case path != "":
		if hf := hfTokenizerFile(path); hf != "" {
			bt := &BundleTokenizer{Copy: hf, From: hf}
			if v, err := tokenizer.Load(hf, vocabSize); err == nil {
				if t, err := tokenizer.New(v); err == nil {
					bt.EOG = t.EOG()
				}
			}
			return bt, nil
		}
		var err error
		if v, err = tokenizer.Load(path, vocabSize); err != nil {
			return nil, err
		}
		from = path
	default:
		if _, ok := md.Get("tokenizer.ggml.model"); !ok {
			return nil, ErrNoTokenizer
		}
		var err error
		if v, err = tokenizer.FromGGUF(md); err != nil {
			return nil, err
		}
		from = "the model's tokenizer.ggml.* vocabulary"
	}
	if vocabSize > 0 && len(v.Tokens) > vocabSize {
		return nil, fmt.Errorf("%s has %d tokens, more than the model's %d: not this model's vocabulary", from, len(v.Tokens), vocabSize)
	}
	data, err := tokenizer.WriteHF(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	t, err := checkWritten(v, data, texts)
	if err != nil {
		return nil, fmt.Errorf("%s: tokenizer.json written from it: %w", from, err)
	}
	return &BundleTokenizer{JSON: data, Vocab: v, From: from, EOG: t.EOG()}, nil
}

// checkWritten reads a written tokenizer.json back and compares its ids
// with the vocabulary's own, with and without special tokens, on texts
// and a few fixed ones. It returns the vocabulary's tokenizer.
func checkWritten(v *tokenizer.Vocab, data []byte, texts []string) (*tokenizer.Tokenizer, error) {
	want, err := tokenizer.New(v)
	if err != nil {
		return nil, err
	}
	back, err := tokenizer.ParseHF(data)
	if err != nil {
		return nil, err
	}
	got, err := tokenizer.New(back)
	if err != nil {
		return nil, err
	}
	texts = append(slices.Clone(texts), "Hello world", " two  spaces\tand\nlines", "Once upon a time, 1234 ½ üñï 日本語 🦙", "don't stop")
	for _, s := range texts {
		for _, add := range []bool{false, true} {
			if a, b := got.Encode(s, add), want.Encode(s, add); !slices.Equal(a, b) {
				return nil, fmt.Errorf("encodes %q (add special %v) as %v, the vocabulary as %v", s, add, a, b)
			}
		}
	}
	return want, nil
}

// ModelTokenizer is MakeBundleTokenizer for model m: without a path, an
// HF checkpoint's own tokenizer.json, else the vocabulary in md (m's
// metadata when md is nil). Without any, the error names --tokenizer.
func ModelTokenizer(m *model.Model, path string, md gguf.Metadata, texts []string) (*BundleTokenizer, error) {
	if path == "" && m.Format != "gguf" && m.Path != "" {
		dir := m.Path
		if st, err := os.Stat(dir); err == nil && !st.IsDir() {
			dir = filepath.Dir(dir)
		}
		path = hfTokenizerFile(dir)
	}
	if md == nil {
		md = m.Metadata
	}
	tok, err := MakeBundleTokenizer(path, md, m.Config.VocabSize, texts)
	if errors.Is(err, ErrNoTokenizer) {
		return nil, fmt.Errorf("%w: %s has no tokenizer.json and no tokenizer.ggml.* vocabulary; give the model's tokenizer with --tokenizer FILE (a tokenizer.json, a GGUF or a llama2.c tokenizer.bin)", err, m.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return tok, nil
}

// hfTokenizerFile returns path's tokenizer.json when path is one or a
// directory holding one.
func hfTokenizerFile(path string) string {
	if filepath.Base(path) == qnnpack.TokenizerName {
		return path
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		if p := filepath.Join(path, qnnpack.TokenizerName); fileExists(p) {
			return p
		}
	}
	return ""
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// vocabMetadata is the tokenizer.* keys the qmodel will carry: Options.Metadata's,
// else a GGUF source's own.
func vocabMetadata(o *Options, src *model.Model) gguf.Metadata {
	if _, ok := o.Metadata.Get("tokenizer.ggml.model"); ok || src.Format != "gguf" {
		return o.Metadata
	}
	var md gguf.Metadata
	for _, kv := range src.Metadata {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			md = append(md, kv)
		}
	}
	return md
}

// bundleTokenizer settles the bundle's tokenizer.json (b.tok) and returns
// the metadata for the qmodel: Options.Metadata, plus the vocabulary's
// keys when it came from a file and the qmodel would otherwise have none,
// so that the qmodel and the bundle tokenize alike.
func (b *builder) bundleTokenizer(src *model.Model) (gguf.Metadata, error) {
	var texts []string
	for _, p := range b.o.Prompts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	tok, err := ModelTokenizer(src, b.o.Tokenizer, vocabMetadata(&b.o, src), texts)
	if err != nil {
		return nil, err
	}
	b.tok = tok
	md := b.o.Metadata
	if _, ok := md.Get("tokenizer.ggml.model"); !ok {
		v := tok.Vocab
		if v == nil {
			v, _ = tokenizer.Load(tok.Copy, src.Config.VocabSize) // a tokenizer.json this package cannot read adds nothing
		}
		if v != nil {
			md = append(slices.Clone(md), v.GGUFMetadata()...)
		}
	}
	return md, nil
}

// tokNote says where the bundle's tokenizer.json comes from.
func (b *builder) tokNote() string {
	if b.tok.Copy != "" {
		return "copied from " + b.tok.Copy
	}
	return "written from " + b.tok.From
}
