package tokenizer

import (
	"os"
	"path/filepath"

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
