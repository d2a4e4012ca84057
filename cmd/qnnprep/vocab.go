package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// tokenizerMetadata returns the tokenizer.* keys to carry into an output
// GGUF: the source GGUF's own, or those built from tokenizer.json beside an
// HF checkpoint. A model without tokenizer files gets none; it still decodes
// token ids.
func tokenizerMetadata(m *model.Model) (gguf.Metadata, error) {
	if m.Format == "gguf" {
		var md gguf.Metadata
		for _, kv := range m.Metadata {
			if strings.HasPrefix(kv.Key, "tokenizer.") {
				md = append(md, kv)
			}
		}
		return md, nil
	}
	dir := m.Path
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		dir = filepath.Dir(dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	v, err := tokenizer.FromHF(dir) // its errors name tokenizer.json
	if err != nil {
		return nil, err
	}
	md := v.GGUFMetadata()
	if err := m.Config.CheckVocab(md); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", filepath.Join(dir, "tokenizer.json"), err)
	}
	return md, nil
}

// loadVocab reads a vocabulary given by --vocab or --tokenizer: a GGUF
// (its tokenizer.* keys), an HF directory or tokenizer.json, or a llama2.c
// tokenizer.bin.
func loadVocab(path string, vocabSize int) (*tokenizer.Vocab, error) {
	return tokenizer.Load(path, vocabSize)
}
