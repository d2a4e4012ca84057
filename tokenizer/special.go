package tokenizer

// Special tokens: the texts llama.cpp recognises as control and
// end-of-generation tokens, and splitting text at special tokens.

import (
	"slices"
	"strings"
)

// eogTexts are the texts of tokens that llama.cpp treats as ending
// generation (besides EOS and the GGUF's EOT/EOM ids), whatever their
// stored type: the list of llama.cpp v0.4.0 as measured through
// node-llama-cpp (a vocab holding each text as a normal token, tokenized
// with parse_special and checked with isEogToken), plus the EOT candidates
// below (it picks "</s>" as the EOT token of the qwen2 test vocabulary and
// "<|end|>" for phi-3).
var eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
	"<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "<|end_of_text|>",
	"<end_of_utterance>", "[EOS]", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>"}

// controlTexts become control tokens without ending generation (measured
// as above).
var controlTexts = []string{"<|constrain|>"}

// eogTokens returns the ids that end generation: EOS, the GGUF's EOT/EOM/
// FIM pad/rep/sep ids, and the tokens found by text.
func eogTokens(v *Vocab, ids map[string]int32) map[int32]bool {
	eog := map[int32]bool{}
	if v.EOS >= 0 {
		eog[v.EOS] = true
	}
	for _, k := range []string{"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if id, ok := v.Extra.Int(k); ok && id >= 0 && id < int64(len(v.Tokens)) {
			eog[int32(id)] = true
		}
	}
	texts := eogTexts
	for _, r := range roleTexts {
		if _, ok := v.Extra.Get(r.key); !ok && r.eog {
			texts = append(texts[:len(texts):len(texts)], r.texts...)
		}
	}
	for _, s := range texts {
		if id, ok := ids[s]; ok {
			eog[id] = true
		}
	}
	for _, k := range []string{"tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"} {
		if id, ok := v.Extra.Int(k); ok && id >= 0 && id < int64(len(v.Tokens)) {
			eog[int32(id)] = true
		}
	}
	return eog
}

// roleTexts are the texts by which llama.cpp recognises the EOT, EOM and
// fill-in-the-middle tokens when the GGUF does not give their ids; those
// marked eog also end generation. llama.cpp takes the first match in hash
// order for each role; taking every match keeps this deterministic and
// differs only for a vocabulary with two candidates for one role.
var roleTexts = []struct {
	key   string
	eog   bool
	texts []string
}{
	{"tokenizer.ggml.eot_token_id", true, []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>", "</s>"}},
	{"tokenizer.ggml.eom_token_id", true, []string{"<|eom_id|>"}},
	{"tokenizer.ggml.fim_pre_token_id", false, []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}},
	{"tokenizer.ggml.fim_suf_token_id", false, []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}},
	{"tokenizer.ggml.fim_mid_token_id", false, []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}},
	{"tokenizer.ggml.fim_pad_token_id", true, []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>"}},
	{"tokenizer.ggml.fim_rep_token_id", true, []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
	{"tokenizer.ggml.fim_sep_token_id", true, []string{"<|file_sep|>"}},
}

// llamaCppTypes returns the token types llama.cpp works with: the vocab's,
// except that tokens it recognises by their text as EOT, EOM, FIM or
// end-of-generation tokens are control tokens whatever their stored type
// ("this is probably a bug in the model", as llama.cpp warns). This decides
// which texts parse_special=false leaves alone.
func llamaCppTypes(v *Vocab, ids map[string]int32) []int32 {
	types := make([]int32, len(v.Tokens))
	if v.Types != nil {
		copy(types, v.Types)
	} else {
		for i := range types {
			types[i] = TypeNormal
		}
	}
	control := func(texts []string) {
		for _, s := range texts {
			if id, ok := ids[s]; ok {
				types[id] = TypeControl
			}
		}
	}
	for _, r := range roleTexts {
		if _, ok := v.Extra.Get(r.key); !ok {
			control(r.texts)
		}
	}
	control(eogTexts)
	control(controlTexts)
	return types
}

func idSet(ids []int32) map[int32]bool {
	if len(ids) == 0 {
		return nil
	}
	m := make(map[int32]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// IsEOG reports whether generation should stop at id: EOS, the GGUF's EOT
// and EOM tokens, and tokens such as <|im_end|>, <|endoftext|> and
// <|eot_id|>, as llama.cpp's llama_vocab_is_eog decides.
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// EOG lists the end-of-generation ids in increasing order.
func (t *Tokenizer) EOG() []int32 {
	out := make([]int32, 0, len(t.eog))
	for id := range t.eog {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// A fragment is raw text (id < 0) or a special token matched in the text.
type fragment struct {
	text string
	id   int32
}

// cSpace is C's isspace, which llama.cpp's lstrip/rstrip use.
const cSpace = " \t\n\v\f\r"

// partition splits text at special tokens, longest token first, each
// occurrence left to right, as llama.cpp's tokenizer_st_partition does.
// Without parseSpecial only user-defined tokens are split out (control and
// unknown tokens are then plain text). A token with lstrip/rstrip also
// takes the whitespace before/after it.
func (t *Tokenizer) partition(text string, parseSpecial bool, st *state) []fragment {
	frags := append(st.frags[:0], fragment{text: text, id: -1})
	for _, id := range t.special {
		if !parseSpecial && t.types[id] != TypeUserDefined {
			continue
		}
		tok := t.v.Tokens[id]
		found := false
		for _, f := range frags {
			if f.id < 0 && strings.Contains(f.text, tok) {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		out := st.frags2[:0]
		for _, f := range frags {
			if f.id >= 0 {
				out = append(out, f)
				continue
			}
			rest := f.text
			for {
				k := strings.Index(rest, tok)
				if k < 0 {
					break
				}
				left := rest[:k]
				if t.lstrip[id] {
					left = strings.TrimRight(left, cSpace)
				}
				if left != "" {
					out = append(out, fragment{text: left, id: -1})
				}
				out = append(out, fragment{id: id})
				rest = rest[k+len(tok):]
				if t.rstrip[id] {
					rest = strings.TrimLeft(rest, cSpace)
				}
			}
			if rest != "" {
				out = append(out, fragment{text: rest, id: -1})
			}
		}
		frags, st.frags2 = out, frags
	}
	st.frags = frags
	return frags
}
