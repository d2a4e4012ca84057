package tokenizer

import (
	"fmt"
	"math"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
)

// Token types, as stored in tokenizer.ggml.token_type (llama_token_type).
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Tokenizer model names (tokenizer.ggml.model).
const (
	ModelSPM = "llama" // SentencePiece-style: scores, ▁ for space, <0xXX> byte fallback
	ModelBPE = "gpt2"  // byte-level BPE: merges, bytes mapped to printable characters
)

// Vocab is a tokenizer vocabulary, independent of the file it came from.
type Vocab struct {
	Model  string    // ModelSPM or ModelBPE
	Pre    string    // pre-tokenizer name as in tokenizer.ggml.pre ("qwen2", "llama-bpe", ...); "default" for SPM
	Tokens []string  // token text by id: ▁ for space (SPM), byte-level characters (BPE), raw text for added tokens
	Scores []float32 // nil or one per token; SPM merges by score
	Types  []int32   // nil (all normal) or one per token: TypeNormal ... TypeByte
	Merges []string  // BPE merges "left right", rank = index

	BOS, EOS, UNK, PAD int32 // -1 = none

	AddBOS, AddEOS bool
	AddSpacePrefix bool // SPM: prepend ▁ to the text (and after each special token), like SentencePiece

	// LStrip and RStrip list tokens that, matched in the text as special
	// tokens, also take the whitespace before (LStrip) or after (RStrip)
	// them: Hugging Face's added-token lstrip/rstrip, which llama.cpp sets
	// by model name (Phi-3). GGUF does not store them.
	LStrip, RStrip []int32

	// Extra holds the other tokenizer.* GGUF keys (chat template, EOT id,
	// ...) so that FromGGUF followed by GGUFMetadata keeps them.
	Extra gguf.Metadata
}

// Type returns the type of token id (TypeNormal when Types is nil).
func (v *Vocab) Type(id int32) int32 {
	if v.Types == nil {
		return TypeNormal
	}
	return v.Types[id]
}

// validate checks the vocabulary for internal consistency.
func (v *Vocab) validate() error {
	n := len(v.Tokens)
	switch v.Model {
	case ModelSPM, ModelBPE:
	case "":
		return fmt.Errorf("tokenizer: vocab has no model (want %q or %q)", ModelSPM, ModelBPE)
	default:
		return fmt.Errorf("tokenizer: unsupported tokenizer model %q (want %q or %q)", v.Model, ModelSPM, ModelBPE)
	}
	if n == 0 {
		return fmt.Errorf("tokenizer: vocab has no tokens")
	}
	if n > math.MaxInt32 {
		return fmt.Errorf("tokenizer: vocab has %d tokens, more than an int32 id can address", n)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return fmt.Errorf("tokenizer: vocab has %d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil {
		if len(v.Types) != n {
			return fmt.Errorf("tokenizer: vocab has %d token types for %d tokens", len(v.Types), n)
		}
		for i, t := range v.Types {
			if t < TypeUndefined || t > TypeByte {
				return fmt.Errorf("tokenizer: token %d (%q) has type %d, want 0..6", i, v.Tokens[i], t)
			}
		}
	}
	for _, s := range []struct {
		name string
		id   int32
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"UNK", v.UNK}, {"PAD", v.PAD}} {
		if s.id < -1 || int(s.id) >= n {
			return fmt.Errorf("tokenizer: %s id %d out of range [-1, %d)", s.name, s.id, n)
		}
	}
	for _, ids := range [][]int32{v.LStrip, v.RStrip} {
		for _, id := range ids {
			if id < 0 || int(id) >= n {
				return fmt.Errorf("tokenizer: lstrip/rstrip token id %d out of range [0, %d)", id, n)
			}
		}
	}
	if v.AddBOS && v.BOS < 0 {
		return fmt.Errorf("tokenizer: AddBOS set but the vocab has no BOS token")
	}
	if v.AddEOS && v.EOS < 0 {
		return fmt.Errorf("tokenizer: AddEOS set but the vocab has no EOS token")
	}
	if v.Model == ModelBPE {
		for i, m := range v.Merges {
			if _, _, ok := splitMerge(m); !ok {
				return fmt.Errorf("tokenizer: merge %d (%q) is not \"left right\"", i, m)
			}
		}
		if _, ok := preTokenizers[v.Pre]; !ok {
			return fmt.Errorf("tokenizer: unknown pre-tokenizer %q (known: %s)", v.Pre, strings.Join(PreTokenizers(), ", "))
		}
	}
	return nil
}

// splitMerge splits a merge rule at its first space after the first byte,
// as llama.cpp does (so a left part may itself start with a space).
func splitMerge(m string) (left, right string, ok bool) {
	if len(m) < 3 {
		return "", "", false
	}
	i := strings.IndexByte(m[1:], ' ')
	if i < 0 {
		return "", "", false
	}
	i++
	left, right = m[:i], m[i+1:]
	return left, right, right != ""
}
