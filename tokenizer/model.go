package tokenizer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// ForModel returns the tokenizer that comes with m, opened from path: the
// tokenizer.ggml.* keys of a GGUF file, or tokenizer.json in a Hugging Face
// directory (path may name a file inside it).
func ForModel(m *model.Model, path string) (*Tokenizer, error) {
	var v *Vocab
	var err error
	if m.Format == "gguf" {
		v, err = FromGGUF(m.Metadata)
	} else {
		dir := path
		if fi, serr := os.Stat(path); serr == nil && !fi.IsDir() {
			dir = filepath.Dir(path)
		}
		v, err = FromHF(dir)
	}
	if err != nil {
		return nil, err
	}
	return New(v)
}

// ModelMetadata returns the tokenizer.* keys to carry into an output GGUF
// made from m: a GGUF source's own, or those built from tokenizer.json
// beside an HF checkpoint. A model without tokenizer files gets none; it
// still decodes token ids.
func ModelMetadata(m *model.Model) (gguf.Metadata, error) {
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
	v, err := FromHF(dir) // its errors name tokenizer.json
	if err != nil {
		return nil, err
	}
	md := v.GGUFMetadata()
	if err := m.Config.CheckVocab(md); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", filepath.Join(dir, "tokenizer.json"), err)
	}
	return md, nil
}
