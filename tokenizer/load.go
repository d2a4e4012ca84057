package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
)

// Load reads a vocabulary from a file of any kind this package knows: a
// GGUF (its tokenizer.ggml.* keys), a Hugging Face directory or its
// tokenizer.json, or a llama2.c tokenizer.bin, which does not store its
// token count (vocabSize, from the model; 0 reads to the end of the file).
func Load(path string, vocabSize int) (*Vocab, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	switch {
	case fi.IsDir():
		return FromHF(path)
	case filepath.Base(path) == "tokenizer.json":
		return FromHF(filepath.Dir(path))
	case strings.HasSuffix(path, ".gguf"):
		f, err := gguf.Open(path)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		defer f.Close()
		v, err := FromGGUF(f.Metadata)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return v, nil
	default:
		return FromLlama2c(path, vocabSize)
	}
}

// ParseHF reads a tokenizer.json on its own (as FromHF without
// tokenizer_config.json and config.json beside it).
func ParseHF(data []byte) (*Vocab, error) {
	v, err := parseHF(data, "")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	return v, nil
}
