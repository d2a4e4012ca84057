package model

import (
	"fmt"
	"math"

	"github.com/qnnprep/qnnprep/gguf"
)

// tokenIDKeys are the GGUF special-token keys whose ids index the
// embedding; llama.cpp reads them all.
var tokenIDKeys = []string{
	"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
	"tokenizer.ggml.padding_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
	"tokenizer.ggml.seperator_token_id",
}

// CheckVocab checks GGUF tokenizer.* keys against the model's vocabulary
// (the rows of token_embd.weight): the token list must have one token per
// row, as llama.cpp sizes the embedding by it, and every special-token id
// must name a row. An id of -1 or 0xFFFFFFFF means "none". Metadata
// without tokenizer keys passes.
func (c *Config) CheckVocab(md gguf.Metadata) error {
	if v, ok := md.Get("tokenizer.ggml.tokens"); ok {
		toks, ok := md.Strings("tokenizer.ggml.tokens")
		if !ok {
			return fmt.Errorf("key tokenizer.ggml.tokens: want an array of strings, got %T", v)
		}
		if len(toks) != c.VocabSize {
			return fmt.Errorf("key tokenizer.ggml.tokens: a vocabulary of %d tokens (ids 0..%d) for an embedding of %d rows (token_embd.weight, %s.vocab_size); want one token per row",
				len(toks), len(toks)-1, c.VocabSize, c.Arch)
		}
	}
	for _, key := range tokenIDKeys {
		v, ok := md.Get(key)
		if !ok {
			continue
		}
		n, ok := md.Int(key)
		if !ok {
			return fmt.Errorf("key %s: want an integer token id, got %T", key, v)
		}
		if n == -1 || n == math.MaxUint32 {
			continue
		}
		if n < 0 || n >= int64(c.VocabSize) {
			return fmt.Errorf("key %s = %d is outside the vocabulary (ids 0..%d)", key, n, c.VocabSize-1)
		}
	}
	return nil
}
