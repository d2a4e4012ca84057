package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The Split regexes of the Hugging Face tokenizer.json files this package
// recognises, exactly as they appear there, and the pre-tokenizer each means.
var hfSplitRegexes = map[string]string{
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:             "qwen2",
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "qwen35",
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:        "llama-bpe",
	`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`:                                                 "gpt-2",
}

// hfLimit bounds token ids read from JSON before anything is sized by them.
const hfLimit = 1 << 24

type hfTokenizerJSON struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type         string           `json:"type"`
		Vocab        map[string]int64 `json:"vocab"`
		Merges       json.RawMessage  `json:"merges"`
		IgnoreMerges bool             `json:"ignore_merges"`
		ByteFallback bool             `json:"byte_fallback"`
		UnkToken     *string          `json:"unk_token"`
	} `json:"model"`
}

type hfAddedToken struct {
	ID      int64  `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
	LStrip  bool   `json:"lstrip"`
	RStrip  bool   `json:"rstrip"`
}

// hfComponent is a normalizer, pre-tokenizer or post-processor object.
type hfComponent struct {
	Type          string          `json:"type"`
	Pretokenizers []hfComponent   `json:"pretokenizers"`
	Normalizers   []hfComponent   `json:"normalizers"`
	Processors    []hfComponent   `json:"processors"`
	Pattern       json.RawMessage `json:"pattern"`
	Behavior      string          `json:"behavior"`
	Invert        bool            `json:"invert"`
	UseRegex      *bool           `json:"use_regex"`
	AddPrefix     bool            `json:"add_prefix_space"`
	Individual    bool            `json:"individual_digits"`
	Single        []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
	} `json:"single"`
}

// FromHF reads a Hugging Face tokenizer directory: tokenizer.json (a
// byte-level BPE model, or a SentencePiece-style BPE model with byte
// fallback laid out as Llama 2's) and, when present, tokenizer_config.json
// (bos/eos/unk/pad tokens, add_bos_token/add_eos_token) and config.json
// (the vocabulary size the embedding is padded to, and token ids that
// tokenizer_config.json leaves unset); without them, BOS and EOS are the
// tokens the post-processor's template adds. The pre-tokenizer is
// identified from the JSON: every layout WriteHF writes, the Qwen2,
// Qwen3.5 and Llama 3 Split regexes and plain GPT-2 ByteLevel. A
// SentencePiece-style model's merges become scores (an earlier merge makes
// a higher-scoring token), which assumes, as Hugging Face's converter
// writes them, that every split of a token into two tokens is a merge. Added tokens become control tokens when special (or when they
// look special, like <|...|>, as llama.cpp's converter decides) and
// user-defined otherwise; ids without a token are "[PADn]", unused, as the
// converter writes them.
func FromHF(dir string) (*Vocab, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	v, err := parseHF(data, dir)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return v, nil
}

func parseHF(data []byte, dir string) (*Vocab, error) {
	var tj hfTokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, err
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("model type %q: only byte-level BPE tokenizers are supported", tj.Model.Type)
	}
	model, pre, addSpacePrefix := ModelBPE, "", false
	if tj.Model.ByteFallback {
		model, pre = ModelSPM, "default"
		var err error
		if addSpacePrefix, err = hfSPMNormalizer(tj.Normalizer, tj.PreTokenizer); err != nil {
			return nil, err
		}
	} else if name, ok := hfPreTokenizerName(tj.Normalizer, tj.PreTokenizer); ok {
		pre = name // as WriteHF writes it
	} else {
		if err := checkHFNormalizer(tj.Normalizer); err != nil {
			return nil, err
		}
		var err error
		if pre, err = hfPreTokenizer(tj.PreTokenizer); err != nil {
			return nil, err
		}
	}
	if model == ModelBPE {
		if ignore := preTokenizers[pre].ignoreMerges; ignore != tj.Model.IgnoreMerges {
			return nil, fmt.Errorf("pre-tokenizer %s with ignore_merges=%v is not supported (want %v)", pre, tj.Model.IgnoreMerges, ignore)
		}
	}
	merges, err := hfMerges(tj.Model.Merges)
	if err != nil {
		return nil, err
	}

	cfgSize, cfgIDs, err := readHFConfig(dir)
	if err != nil {
		return nil, err
	}
	n := int64(cfgSize)
	for s, id := range tj.Model.Vocab {
		if id < 0 || id >= hfLimit {
			return nil, fmt.Errorf("vocab token %q has id %d, want 0..%d", s, id, hfLimit-1)
		}
		n = max(n, id+1)
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || a.ID >= hfLimit {
			return nil, fmt.Errorf("added token %q has id %d, want 0..%d", a.Content, a.ID, hfLimit-1)
		}
		n = max(n, a.ID+1)
	}
	// Padding up to config.json's vocab_size is small in practice; bound it
	// so that a stray id cannot make millions of "[PADn]" tokens.
	if defined := int64(len(tj.Model.Vocab) + len(tj.AddedTokens)); n > 2*defined+1<<16 {
		return nil, fmt.Errorf("%d ids for %d tokens: too many unused ids (vocab_size or a token id too large)", n, defined)
	}
	v := &Vocab{
		Model: model, Pre: pre,
		Tokens: make([]string, n),
		Types:  make([]int32, n),
		Merges: merges,
		BOS:    -1, EOS: -1, UNK: -1, PAD: -1,
		AddSpacePrefix: addSpacePrefix,
	}
	set := make([]bool, n)
	for s, id := range tj.Model.Vocab {
		if set[id] {
			return nil, fmt.Errorf("vocab tokens %q and %q share id %d", v.Tokens[id], s, id)
		}
		v.Tokens[id], v.Types[id], set[id] = s, TypeNormal, true
		if _, ok := parseByteToken(s); ok && model == ModelSPM {
			v.Types[id] = TypeByte
		}
	}
	if model == ModelSPM && tj.Model.UnkToken != nil {
		id, ok := tj.Model.Vocab[*tj.Model.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model.unk_token %q is not in model.vocab", *tj.Model.UnkToken)
		}
		v.UNK, v.Types[id] = int32(id), TypeUnknown
	}
	for _, a := range tj.AddedTokens {
		text, typ := a.Content, TypeUserDefined
		switch {
		case int32(a.ID) == v.UNK:
			typ = TypeUnknown
		case a.Special || looksSpecial(text):
			typ = TypeControl
		case model == ModelBPE:
			text = strings.ReplaceAll(text, "▁", " ")
		}
		v.Tokens[a.ID], v.Types[a.ID], set[a.ID] = text, typ, true
		if a.LStrip {
			v.LStrip = append(v.LStrip, int32(a.ID))
		}
		if a.RStrip {
			v.RStrip = append(v.RStrip, int32(a.ID))
		}
	}
	for i := range v.Tokens {
		if !set[i] {
			v.Tokens[i], v.Types[i] = fmt.Sprintf("[PAD%d]", i), TypeUnused
		}
	}
	if model == ModelSPM {
		v.Scores = spmScores(v.Tokens, merges)
		v.Merges = nil
	}
	if err := applyHFSpecials(v, dir, cfgIDs, tj); err != nil {
		return nil, err
	}
	if err := v.validate(); err != nil {
		return nil, err
	}
	return v, nil
}

// looksSpecial follows llama.cpp's converter (does_token_look_special):
// some models mark such added tokens as not special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

func isJSONNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// checkHFNormalizer accepts no normalizer or NFC (which the qwen2 and
// mpt pre-tokenizers apply).
func checkHFNormalizer(raw json.RawMessage) error {
	if isJSONNull(raw) {
		return nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("normalizer: %w", err)
	}
	if c.Type == "Sequence" && len(c.Normalizers) == 1 {
		c = c.Normalizers[0]
	}
	if c.Type != "NFC" {
		return fmt.Errorf("normalizer %s is not supported (only none or NFC)", c.Type)
	}
	return nil
}

// hfPreTokenizer names the pre-tokenizer a tokenizer.json describes.
func hfPreTokenizer(raw json.RawMessage) (string, error) {
	if isJSONNull(raw) {
		return "", fmt.Errorf("no pre_tokenizer: not a byte-level BPE tokenizer")
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", fmt.Errorf("pre_tokenizer: %w", err)
	}
	seq := []hfComponent{c}
	if c.Type == "Sequence" {
		seq = c.Pretokenizers
	}
	if len(seq) == 0 {
		return "", fmt.Errorf("pre_tokenizer: empty Sequence")
	}
	var kinds []string
	for _, p := range seq {
		kinds = append(kinds, p.Type)
	}
	desc := strings.Join(kinds, "+")
	useRegex := func(p hfComponent) bool { return p.UseRegex == nil || *p.UseRegex }
	last := seq[len(seq)-1]
	if last.Type != "ByteLevel" || last.AddPrefix {
		return "", fmt.Errorf("pre_tokenizer %s: want a ByteLevel pre-tokenizer (without add_prefix_space) last", desc)
	}
	switch {
	case len(seq) == 1 && useRegex(last):
		return "gpt-2", nil
	case len(seq) == 2 && seq[0].Type == "Digits" && seq[0].Individual && useRegex(last):
		return "starcoder", nil
	case len(seq) == 2 && seq[0].Type == "Split" && !useRegex(last):
		s := seq[0]
		var pat struct{ Regex string }
		if err := json.Unmarshal(s.Pattern, &pat); err != nil || pat.Regex == "" {
			return "", fmt.Errorf("pre_tokenizer Split: pattern is not a regex")
		}
		if !strings.EqualFold(s.Behavior, "isolated") || s.Invert {
			return "", fmt.Errorf("pre_tokenizer Split with behavior %q, invert %v: only isolated is supported", s.Behavior, s.Invert)
		}
		if name, ok := hfSplitRegexes[pat.Regex]; ok {
			return name, nil
		}
		return "", fmt.Errorf("pre_tokenizer Split regex %q is not one this package knows (Qwen2, Qwen3.5, Llama 3, GPT-2)", pat.Regex)
	}
	return "", fmt.Errorf("pre_tokenizer %s is not supported", desc)
}

// hfMerges reads merges as "a b" strings or ["a", "b"] pairs.
func hfMerges(raw json.RawMessage) ([]string, error) {
	if isJSONNull(raw) {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		return strs, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("model.merges: want strings or pairs of strings: %w", err)
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 || p[0] == "" || p[1] == "" || strings.Contains(p[0][1:], " ") {
			return nil, fmt.Errorf("model.merges[%d] = %q: want two tokens, the first without a space", i, p)
		}
		out[i] = p[0] + " " + p[1]
	}
	return out, nil
}

// hfIDs are the special-token ids config.json gives.
type hfIDs struct{ bos, eos, pad *int64 }

// readHFConfig reads the vocab size and token ids of config.json (or its
// text_config, for multimodal models), if the file exists.
func readHFConfig(dir string) (int, hfIDs, error) {
	path := filepath.Join(dir, "config.json")
	data, err := readBeside(dir, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, hfIDs{}, nil
	}
	if err != nil {
		return 0, hfIDs{}, err
	}
	type cfg struct {
		VocabSize int64           `json:"vocab_size"`
		BOS       json.RawMessage `json:"bos_token_id"`
		EOS       json.RawMessage `json:"eos_token_id"`
		PAD       json.RawMessage `json:"pad_token_id"`
	}
	var c struct {
		cfg
		TextConfig *cfg `json:"text_config"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return 0, hfIDs{}, fmt.Errorf("%s: %w", path, err)
	}
	top := c.cfg
	if c.TextConfig != nil {
		top = *c.TextConfig
	}
	if top.VocabSize < 0 || top.VocabSize >= hfLimit {
		return 0, hfIDs{}, fmt.Errorf("%s: vocab_size %d, want 0..%d", path, top.VocabSize, hfLimit-1)
	}
	first := func(raw json.RawMessage) *int64 {
		var one int64
		if json.Unmarshal(raw, &one) == nil && !isJSONNull(raw) {
			return &one
		}
		var list []int64
		if json.Unmarshal(raw, &list) == nil && len(list) > 0 {
			return &list[0]
		}
		return nil
	}
	return int(top.VocabSize), hfIDs{first(top.BOS), first(top.EOS), first(top.PAD)}, nil
}

// applyHFSpecials sets BOS/EOS/UNK/PAD and AddBOS/AddEOS from
// tokenizer_config.json, config.json and the post-processor, in that order
// of precedence.
func applyHFSpecials(v *Vocab, dir string, ids hfIDs, tj hfTokenizerJSON) error {
	byText := make(map[string]int32, len(tj.AddedTokens))
	for _, a := range tj.AddedTokens {
		byText[a.Content] = int32(a.ID)
	}
	lookup := func(s string) (int32, bool) {
		if id, ok := byText[s]; ok {
			return id, true
		}
		id, ok := tj.Model.Vocab[s]
		return int32(id), ok
	}
	n := int64(len(v.Tokens))
	for _, c := range []struct {
		dst *int32
		id  *int64
	}{{&v.BOS, ids.bos}, {&v.EOS, ids.eos}, {&v.PAD, ids.pad}} {
		if c.id != nil && *c.id >= 0 && *c.id < n {
			*c.dst = int32(*c.id)
		}
	}

	path := filepath.Join(dir, "tokenizer_config.json")
	data, err := readBeside(dir, path)
	var addBOS, addEOS *bool
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		var tc map[string]json.RawMessage
		if err := json.Unmarshal(data, &tc); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, c := range []struct {
			key string
			dst *int32
		}{{"bos_token", &v.BOS}, {"eos_token", &v.EOS}, {"unk_token", &v.UNK}, {"pad_token", &v.PAD}} {
			raw, ok := tc[c.key]
			if !ok || isJSONNull(raw) {
				continue
			}
			var text string
			if json.Unmarshal(raw, &text) != nil {
				var obj struct{ Content string }
				if err := json.Unmarshal(raw, &obj); err != nil {
					return fmt.Errorf("%s: %s: want a string or {\"content\": ...}", path, c.key)
				}
				text = obj.Content
			}
			id, ok := lookup(text)
			if !ok {
				return fmt.Errorf("%s: %s %q is not a token", path, c.key, text)
			}
			*c.dst = id
		}
		for _, c := range []struct {
			key string
			dst **bool
		}{{"add_bos_token", &addBOS}, {"add_eos_token", &addEOS}} {
			if raw, ok := tc[c.key]; ok && !isJSONNull(raw) {
				var b bool
				if err := json.Unmarshal(raw, &b); err != nil {
					return fmt.Errorf("%s: %s: want a bool", path, c.key)
				}
				*c.dst = &b
			}
		}
	}
	// Without explicit flags, the post-processor's template says whether
	// BOS/EOS are added (Llama 3: TemplateProcessing "<|begin_of_text|> $A").
	first, last := hfTemplateEnds(tj.PostProcessor)
	// A tokenizer.json alone (as WriteHF writes it) names BOS and EOS only
	// in its template.
	if id, ok := lookup(first); ok && first != "" && v.BOS < 0 {
		v.BOS = id
	}
	if id, ok := lookup(last); ok && last != "" && v.EOS < 0 {
		v.EOS = id
	}
	if addBOS == nil || addEOS == nil {
		if addBOS == nil {
			b := first != "" && v.BOS >= 0 && first == v.Tokens[v.BOS]
			addBOS = &b
		}
		if addEOS == nil {
			b := last != "" && v.EOS >= 0 && last == v.Tokens[v.EOS]
			addEOS = &b
		}
	}
	v.AddBOS = *addBOS && v.BOS >= 0
	v.AddEOS = *addEOS && v.EOS >= 0
	return nil
}

// hfTemplateEnds returns the special tokens a TemplateProcessing puts
// before and after a single sequence ("" for none).
func hfTemplateEnds(raw json.RawMessage) (first, last string) {
	if isJSONNull(raw) {
		return "", ""
	}
	var c hfComponent
	if json.Unmarshal(raw, &c) != nil {
		return "", ""
	}
	procs := []hfComponent{c}
	if c.Type == "Sequence" {
		procs = c.Processors
	}
	for _, p := range procs {
		if p.Type != "TemplateProcessing" || len(p.Single) == 0 {
			continue
		}
		if s := p.Single[0].SpecialToken; s != nil {
			first = s.ID
		}
		if s := p.Single[len(p.Single)-1].SpecialToken; s != nil && len(p.Single) > 1 {
			last = s.ID
		}
	}
	return first, last
}

// hfSPMNormalizer accepts the SentencePiece layout Hugging Face's Llama 2
// converter writes (and WriteHF): no pre-tokenizer, and a normalizer that
// replaces spaces by ▁, with or without a ▁ prepended first. It reports
// whether ▁ is prepended.
func hfSPMNormalizer(normalizer, pre json.RawMessage) (bool, error) {
	if !isJSONNull(pre) {
		return false, fmt.Errorf("SentencePiece-style tokenizer (BPE with byte_fallback) with a pre_tokenizer is not supported (only a Prepend/Replace normalizer)")
	}
	var c struct {
		Type        string
		Normalizers []struct {
			Type    string
			Prepend string
			Content string
			Pattern struct{ String *string }
		}
	}
	if err := json.Unmarshal(normalizer, &c); err != nil {
		return false, fmt.Errorf("normalizer: %w", err)
	}
	n := c.Normalizers
	prepend := len(n) == 2 && n[0].Type == "Prepend" && n[0].Prepend == "▁"
	if prepend {
		n = n[1:]
	}
	if c.Type != "Sequence" || len(n) != 1 || n[0].Type != "Replace" || n[0].Pattern.String == nil ||
		*n[0].Pattern.String != " " || n[0].Content != "▁" {
		return false, fmt.Errorf("SentencePiece-style tokenizer (BPE with byte_fallback): want a normalizer Sequence of Prepend(\"▁\") and Replace(\" \", \"▁\")")
	}
	return prepend, nil
}

// spmScores turns BPE merge ranks into SentencePiece scores: a token made
// by an earlier merge scores higher. Tokens no merge makes score below all
// others.
func spmScores(tokens []string, merges []string) []float32 {
	ids := make(map[string]int, len(tokens))
	for i, s := range tokens {
		ids[s] = i
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -float32(len(merges)) - 1
	}
	made := make([]bool, len(tokens))
	for rank, m := range merges {
		l, r, _ := splitMerge(m)
		if id, ok := ids[l+r]; ok && !made[id] {
			scores[id], made[id] = -float32(rank), true
		}
	}
	return scores
}

// readBeside reads a file beside tokenizer.json; with no directory (a
// tokenizer.json on its own) there is none.
func readBeside(dir, path string) ([]byte, error) {
	if dir == "" {
		return nil, fs.ErrNotExist
	}
	return os.ReadFile(path)
}
