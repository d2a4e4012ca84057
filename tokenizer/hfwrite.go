package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// WriteHF returns a Hugging Face tokenizer.json for v, the format Genie and
// the Hugging Face tokenizers libraries load, which encodes text to the
// ids this package (and llama.cpp) gives with special-token parsing on.
//
// A byte-level BPE vocabulary keeps its merges and gets the pre-tokenizer
// its name stands for (the Split regex of Qwen2, Qwen3.5 or Llama 3, GPT-2's
// ByteLevel regex, Digits for StarCoder, ...). A SentencePiece vocabulary
// becomes a BPE model with byte fallback, as Hugging Face's own converter
// writes Llama 2's: merges are every split of a token into two tokens,
// ranked by the score of the token they make, and a normalizer puts ▁ for
// spaces and before the text. BOS and EOS are added by a
// TemplateProcessing post-processor when the vocabulary asks for them
// (AddBOS, AddEOS); control, user-defined and unknown tokens are added
// tokens, matched in the text before the model runs.
//
// It fails for vocabularies tokenizer.json cannot hold: a token that is
// not valid UTF-8, or a pre-tokenizer with no Hugging Face counterpart.
// A token text that occurs twice keeps its last id, as in llama.cpp.
func WriteHF(v *Vocab) ([]byte, error) {
	if err := v.validate(); err != nil {
		return nil, err
	}
	for i, s := range v.Tokens {
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("tokenizer: token %d (%q) is not valid UTF-8, which tokenizer.json cannot hold", i, s)
		}
	}
	ids := make(map[string]int32, len(v.Tokens))
	for i, s := range v.Tokens {
		ids[s] = int32(i)
	}
	types := llamaCppTypes(v, ids)
	tj := hfOut{Version: "1.0", AddedTokens: []hfAddedOut{}}
	lstrip, rstrip := idSet(v.LStrip), idSet(v.RStrip)
	inModel := make([]bool, len(v.Tokens))
	for i, s := range v.Tokens {
		id := int32(i)
		inModel[i] = ids[s] == id // a duplicate text keeps its last id
		switch types[i] {
		case TypeControl, TypeUserDefined, TypeUnknown:
		default:
			continue
		}
		if s == "" || ids[s] != id {
			continue
		}
		tj.AddedTokens = append(tj.AddedTokens, hfAddedOut{
			ID: id, Content: s, LStrip: lstrip[id], RStrip: rstrip[id],
			Special: types[i] != TypeUserDefined,
		})
		// Byte-level BPE keeps added tokens out of the model, as Qwen's and
		// Llama 3's files do: their raw text is not byte-level text.
		if v.Model == ModelBPE {
			inModel[i] = false
		}
	}
	model := hfModelOut{Type: "BPE", Vocab: hfVocabOut{v.Tokens, inModel}}
	switch v.Model {
	case ModelSPM:
		model.ByteFallback, model.FuseUnk = true, true
		if v.UNK >= 0 {
			model.UnkToken = &v.Tokens[v.UNK]
		}
		model.Merges = spmMerges(v, ids)
		norms := []any{hfReplace{"Replace", hfPattern{String: " "}, "▁"}}
		dec := []any{hfReplace{"Replace", hfPattern{String: "▁"}, " "}, hfType{"ByteFallback"}, hfType{"Fuse"}}
		if v.AddSpacePrefix {
			norms = append([]any{hfPrepend{"Prepend", "▁"}}, norms...)
			dec = append(dec, hfStrip{"Strip", " ", 1, 0})
		}
		tj.Normalizer = hfSequence{Type: "Sequence", Normalizers: norms}
		tj.Decoder = hfSequence{Type: "Sequence", Decoders: dec}
	case ModelBPE:
		hp, ok := hfPreTokenizerOf(v.Pre)
		if !ok {
			return nil, fmt.Errorf("tokenizer: pre-tokenizer %q has no Hugging Face tokenizer.json counterpart", v.Pre)
		}
		tj.Normalizer, tj.PreTokenizer = hp.normalizer, hp.pre
		model.IgnoreMerges = preTokenizers[v.Pre].ignoreMerges
		model.Merges = make([][2]string, 0, len(v.Merges))
		for _, m := range v.Merges {
			l, r, _ := splitMerge(m)
			// tokenizer.json merges name tokens; llama.cpp also accepts
			// merges of other strings, which no tokenizer.json can hold.
			_, lok := ids[l]
			_, rok := ids[r]
			_, ok := ids[l+r]
			if lok && rok && ok {
				model.Merges = append(model.Merges, [2]string{l, r})
			}
		}
		tj.Decoder = hfByteLevel{Type: "ByteLevel", AddPrefixSpace: true, TrimOffsets: true, UseRegex: true}
	}
	tj.PostProcessor = hfTemplate(v)
	tj.Model = model
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tj); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	return buf.Bytes(), nil
}

// spmMerges derives BPE merges from SentencePiece scores: every split of a
// token into two tokens, the merges that make a higher-scoring token
// first (then by token id, left id and right id, for a fixed order). BPE
// then joins the same pairs in the same order as SentencePiece's
// highest-score-first merging.
func spmMerges(v *Vocab, ids map[string]int32) [][2]string {
	type merge struct{ tok, l, r int32 }
	var ms []merge
	for i, s := range v.Tokens {
		if ids[s] != int32(i) {
			continue
		}
		for k := range s { // at each UTF-8 character boundary
			if k == 0 {
				continue
			}
			l, lok := ids[s[:k]]
			r, rok := ids[s[k:]]
			if lok && rok {
				ms = append(ms, merge{int32(i), l, r})
			}
		}
	}
	score := func(id int32) float32 {
		if v.Scores == nil {
			return 0
		}
		return v.Scores[id]
	}
	slices.SortFunc(ms, func(a, b merge) int {
		if sa, sb := score(a.tok), score(b.tok); sa != sb {
			if sa > sb {
				return -1
			}
			return 1
		}
		if a.tok != b.tok {
			return int(a.tok - b.tok)
		}
		if a.l != b.l {
			return int(a.l - b.l)
		}
		return int(a.r - b.r)
	})
	out := make([][2]string, len(ms))
	for i, m := range ms {
		out[i] = [2]string{v.Tokens[m.l], v.Tokens[m.r]}
	}
	return out
}

// hfTemplate is the post-processor that adds BOS and EOS, or nil.
func hfTemplate(v *Vocab) any {
	if !v.AddBOS && !v.AddEOS {
		return nil
	}
	t := hfTemplateOut{Type: "TemplateProcessing", SpecialTokens: map[string]hfSpecialOut{}}
	special := func(id int32, typeID int) hfPiece {
		s := v.Tokens[id]
		t.SpecialTokens[s] = hfSpecialOut{ID: s, IDs: []int32{id}, Tokens: []string{s}}
		return hfPiece{SpecialToken: &hfPieceID{s, typeID}}
	}
	for _, seq := range []struct {
		dst  *[]hfPiece
		name string
	}{{&t.Single, "A"}, {&t.Pair, "A"}, {&t.Pair, "B"}} {
		typeID := 0
		if seq.name == "B" {
			typeID = 1
		}
		if v.AddBOS {
			*seq.dst = append(*seq.dst, special(v.BOS, typeID))
		}
		*seq.dst = append(*seq.dst, hfPiece{Sequence: &hfPieceID{seq.name, typeID}})
		if v.AddEOS {
			*seq.dst = append(*seq.dst, special(v.EOS, typeID))
		}
	}
	return t
}

// hfPre is the normalizer and pre-tokenizer of one pre-tokenizer name.
type hfPre struct {
	normalizer, pre any
}

// hfPreTokenizerOf gives the Hugging Face counterpart of a byte-level BPE
// pre-tokenizer (aliases included), as the model families' own
// tokenizer.json files spell it.
func hfPreTokenizerOf(name string) (hfPre, bool) {
	if hp, ok := hfPreTokenizers[name]; ok {
		return hp, true
	}
	if canon, ok := hfSameAs[name]; ok {
		return hfPreTokenizers[canon], true
	}
	p := preTokenizers[name]
	for canon, hp := range hfPreTokenizers {
		if p != nil && preTokenizers[canon] == p {
			return hp, true
		}
	}
	return hfPre{}, false
}

// hfSameAs lists pre-tokenizers that split exactly like another one
// without being its alias in preTokenizers.
var hfSameAs = map[string]string{"refact": "starcoder", "smollm": "starcoder", "olmo": "mpt"}

const gpt2Regex = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

var (
	hfNFC            = hfType{"NFC"}
	byteLevelRegex   = hfByteLevel{Type: "ByteLevel", TrimOffsets: true, UseRegex: true}
	byteLevelNoRegex = hfByteLevel{Type: "ByteLevel"}
	// Hugging Face's Digits pre-tokenizer splits at Unicode numbers
	// (char::is_numeric); these Splits say the same in a form that does not
	// depend on how a reader defines a digit (Tokenizers.js 0.2.0 takes
	// only 0-9).
	individualDigits  = hfSplitOf(`\p{N}`)
	contiguousDigits  = hfSplitOf(`\p{N}+`)
	contiguousPunct   = hfPunctuation{"Punctuation", "Contiguous"}
	threeDigitsSplit  = hfSplitOf(`[0-9][0-9][0-9]`)
	hfPreTokenizers   = map[string]hfPre{}
	hfSplitRegexNames = map[string]string{}
)

func hfSplitOf(re string) hfSplit {
	return hfSplit{Type: "Split", Pattern: hfPattern{Regex: re}, Behavior: "Isolated"}
}

func hfSeq(pres ...any) hfSequence { return hfSequence{Type: "Sequence", Pretokenizers: pres} }

func init() {
	for re, name := range hfSplitRegexes {
		hfSplitRegexNames[name] = re
	}
	split := func(name string) any { return hfSeq(hfSplitOf(hfSplitRegexNames[name]), byteLevelNoRegex) }
	for name, hp := range map[string]hfPre{
		"gpt-2":     {pre: byteLevelRegex},
		"mpt":       {normalizer: hfNFC, pre: byteLevelRegex},
		"starcoder": {pre: hfSeq(individualDigits, byteLevelRegex)},
		"qwen2":     {normalizer: hfNFC, pre: split("qwen2")},
		"qwen35":    {pre: split("qwen35")},
		"llama-bpe": {pre: split("llama-bpe")},
		"falcon":    {pre: hfSeq(contiguousPunct, byteLevelRegex, contiguousDigits, threeDigitsSplit)},
		"default":   {pre: hfSeq(contiguousPunct, hfSplitOf(gpt2Regex), contiguousDigits, threeDigitsSplit, byteLevelNoRegex)},
		"deepseek-coder": {pre: hfSeq(hfSplitOf(`[\r\n]`), hfSplitOf(`\s?\p{L}+`), hfSplitOf(`\s?\p{P}+`),
			hfSplitOf(`[一-龥ࠀ-一가-퟿]+`), hfSplitOf(`\p{N}`), byteLevelNoRegex)},
	} {
		hfPreTokenizers[name] = hp
	}
}

// The JSON objects of tokenizer.json, with fields in the order Hugging
// Face writes them.
type (
	hfOut struct {
		Version       string       `json:"version"`
		Truncation    any          `json:"truncation"`
		Padding       any          `json:"padding"`
		AddedTokens   []hfAddedOut `json:"added_tokens"`
		Normalizer    any          `json:"normalizer"`
		PreTokenizer  any          `json:"pre_tokenizer"`
		PostProcessor any          `json:"post_processor"`
		Decoder       any          `json:"decoder"`
		Model         hfModelOut   `json:"model"`
	}
	hfAddedOut struct {
		ID         int32  `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	hfModelOut struct {
		Type                    string      `json:"type"`
		Dropout                 any         `json:"dropout"`
		UnkToken                *string     `json:"unk_token"`
		ContinuingSubwordPrefix any         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         any         `json:"end_of_word_suffix"`
		FuseUnk                 bool        `json:"fuse_unk"`
		ByteFallback            bool        `json:"byte_fallback"`
		IgnoreMerges            bool        `json:"ignore_merges"`
		Vocab                   hfVocabOut  `json:"vocab"`
		Merges                  [][2]string `json:"merges"`
	}
	hfType struct {
		Type string `json:"type"`
	}
	hfSequence struct {
		Type          string `json:"type"`
		Normalizers   []any  `json:"normalizers,omitempty"`
		Pretokenizers []any  `json:"pretokenizers,omitempty"`
		Decoders      []any  `json:"decoders,omitempty"`
	}
	hfPattern struct {
		String string `json:"String,omitempty"`
		Regex  string `json:"Regex,omitempty"`
	}
	hfReplace struct {
		Type    string    `json:"type"`
		Pattern hfPattern `json:"pattern"`
		Content string    `json:"content"`
	}
	hfPrepend struct {
		Type    string `json:"type"`
		Prepend string `json:"prepend"`
	}
	hfStrip struct {
		Type    string `json:"type"`
		Content string `json:"content"`
		Start   int    `json:"start"`
		Stop    int    `json:"stop"`
	}
	hfByteLevel struct {
		Type           string `json:"type"`
		AddPrefixSpace bool   `json:"add_prefix_space"`
		TrimOffsets    bool   `json:"trim_offsets"`
		UseRegex       bool   `json:"use_regex"`
	}
	hfPunctuation struct {
		Type     string `json:"type"`
		Behavior string `json:"behavior"`
	}
	hfSplit struct {
		Type     string    `json:"type"`
		Pattern  hfPattern `json:"pattern"`
		Behavior string    `json:"behavior"`
		Invert   bool      `json:"invert"`
	}
	hfTemplateOut struct {
		Type          string                  `json:"type"`
		Single        []hfPiece               `json:"single"`
		Pair          []hfPiece               `json:"pair"`
		SpecialTokens map[string]hfSpecialOut `json:"special_tokens"`
	}
	hfPiece struct {
		SpecialToken *hfPieceID `json:"SpecialToken,omitempty"`
		Sequence     *hfPieceID `json:"Sequence,omitempty"`
	}
	hfPieceID struct {
		ID     string `json:"id"`
		TypeID int    `json:"type_id"`
	}
	hfSpecialOut struct {
		ID     string   `json:"id"`
		IDs    []int32  `json:"ids"`
		Tokens []string `json:"tokens"`
	}
)

// hfVocabOut is the model's vocab object, token → id in id order (a Go map
// would be sorted by text).
type hfVocabOut struct {
	tokens []string
	keep   []bool
}

func (h hfVocabOut) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for i, s := range h.tokens {
		if !h.keep[i] {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		k, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		fmt.Fprintf(&b, ":%d", i)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// hfPreTokenizerName names the pre-tokenizer whose written form (normalizer
// and pre-tokenizer JSON) equals the given one, for reading back what
// WriteHF writes.
func hfPreTokenizerName(normalizer, pre json.RawMessage) (string, bool) {
	got, ok := canonJSON(normalizer, pre)
	if !ok {
		return "", false
	}
	names := make([]string, 0, len(hfPreTokenizers))
	for name := range hfPreTokenizers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		hp := hfPreTokenizers[name]
		n, _ := json.Marshal(hp.normalizer)
		p, _ := json.Marshal(hp.pre)
		if want, ok := canonJSON(n, p); ok && want == got {
			return name, true
		}
	}
	return "", false
}

// canonJSON re-encodes JSON values with sorted keys and no spaces, so that
// equal values compare equal as strings.
func canonJSON(raws ...json.RawMessage) (string, bool) {
	var parts []string
	for _, raw := range raws {
		var x any
		if isJSONNull(raw) {
			parts = append(parts, "null")
			continue
		}
		if err := json.Unmarshal(raw, &x); err != nil {
			return "", false
		}
		b, err := json.Marshal(x)
		if err != nil {
			return "", false
		}
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n"), true
}
