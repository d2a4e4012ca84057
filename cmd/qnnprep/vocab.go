package main

import (
	"github.com/qnnprep/qnnprep/tokenizer"
)

// loadVocab reads a vocabulary given by --vocab or --tokenizer: a GGUF
// (its tokenizer.* keys), an HF directory or tokenizer.json, or a llama2.c
// tokenizer.bin.
func loadVocab(path string, vocabSize int) (*tokenizer.Vocab, error) {
	return tokenizer.Load(path, vocabSize)
}
