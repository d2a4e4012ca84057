package tokenizer

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes and decodes with one vocabulary. It is safe for
// concurrent use.
type Tokenizer struct {
	v        *Vocab
	ids      map[string]int32       // token text → id (the last id wins for duplicates, as in llama.cpp)
	ranks    map[uint64]mergeResult // BPE merge of two token ids → rank and result
	strRanks map[mergeKey]int32     // BPE merges whose sides are not both tokens
	charIDs  [256]int32             // BPE: token of each byte's byte-level character, -1 if absent
	byteIDs  [256]int32             // SPM: <0xXX> tokens, -1 if absent
	types    []int32                // token types as llama.cpp uses them (see llamaCppTypes)
	lstrip   map[int32]bool         // special tokens that take the whitespace before them
	rstrip   map[int32]bool         // ... and after them
	special  []int32                // control, user-defined and unknown tokens, longest text first
	eog      map[int32]bool         // end-of-generation tokens
	pre      *preTokenizer          // BPE only
	cache    wordCache              // BPE word → ids
	states   sync.Pool
}

// state is the scratch space of one Encode call.
type state struct {
	cps    cps
	words  []string
	words2 []string
	syms   []symbol
	queue  bigramQueue
	frags  []fragment
	frags2 []fragment
}

// New checks v and builds a tokenizer for it. v must not be modified afterwards.
func New(v *Vocab) (*Tokenizer, error) {
	if v == nil {
		return nil, fmt.Errorf("tokenizer: nil vocab")
	}
	if err := v.validate(); err != nil {
		return nil, err
	}
	t := &Tokenizer{v: v, ids: make(map[string]int32, len(v.Tokens))}
	t.states.New = func() any { return new(state) }
	for i, s := range v.Tokens {
		t.ids[s] = int32(i)
	}
	for i := range t.byteIDs {
		t.byteIDs[i] = -1
		if id, ok := t.ids[fmt.Sprintf("<0x%02X>", i)]; ok {
			t.byteIDs[i] = id
		}
	}
	t.types = llamaCppTypes(v, t.ids)
	t.lstrip, t.rstrip = idSet(v.LStrip), idSet(v.RStrip)
	for i, s := range v.Tokens {
		switch t.types[i] {
		case TypeControl, TypeUserDefined, TypeUnknown:
			if s != "" {
				t.special = append(t.special, int32(i))
			}
		}
	}
	sort.SliceStable(t.special, func(a, b int) bool {
		return len(v.Tokens[t.special[a]]) > len(v.Tokens[t.special[b]])
	})
	t.eog = eogTokens(v, t.ids)
	if v.Model == ModelBPE {
		t.buildBPE()
	}
	return t, nil
}

// buildBPE prepares byte-level BPE: the token of each byte's character and
// the merge table keyed by the ids of both sides, with the id each merge
// makes, so that merging never builds strings.
func (t *Tokenizer) buildBPE() {
	v := t.v
	t.pre = preTokenizers[v.Pre]
	for b := range t.charIDs {
		t.charIDs[b] = -1
		if id, ok := t.ids[string(byteToRune[b])]; ok {
			t.charIDs[b] = id
		}
	}
	t.ranks = make(map[uint64]mergeResult, len(v.Merges))
	var buf []byte
	for i, m := range v.Merges {
		l, r, _ := splitMerge(m)
		li, lok := t.ids[l]
		ri, rok := t.ids[r]
		if !lok || !rok {
			if t.strRanks == nil {
				t.strRanks = make(map[mergeKey]int32)
			}
			if _, dup := t.strRanks[mergeKey{l, r}]; !dup {
				t.strRanks[mergeKey{l, r}] = int32(i)
			}
			continue
		}
		k := pairKey(li, ri)
		if _, dup := t.ranks[k]; dup {
			continue // the first (lowest) rank counts, as in llama.cpp
		}
		buf = append(append(buf[:0], l...), r...)
		id, ok := t.ids[string(buf)]
		if !ok {
			id = -1
		}
		t.ranks[k] = mergeResult{int32(i), id}
	}
}

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

// Vocab returns the vocabulary (read-only).
func (t *Tokenizer) Vocab() *Vocab { return t.v }

// Len is the number of tokens.
func (t *Tokenizer) Len() int { return len(t.v.Tokens) }

// Validate reports whether id is a token of the vocabulary.
func (t *Tokenizer) Validate(id int32) error {
	if id < 0 || int(id) >= len(t.v.Tokens) {
		return fmt.Errorf("tokenizer: token id %d out of range [0, %d)", id, len(t.v.Tokens))
	}
	return nil
}

// ID returns the id of the token whose text is s.
func (t *Tokenizer) ID(s string) (int32, bool) {
	id, ok := t.ids[s]
	return id, ok
}

func (t *Tokenizer) score(id int32) float32 {
	if t.v.Scores == nil {
		return 0
	}
	return t.v.Scores[id]
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

// Encode tokenizes text with special-token parsing on: the text of a
// control or user-defined token (e.g. "<|im_start|>") becomes that token,
// as llama.cpp's llama_tokenize with parse_special=true and Hugging Face's
// encode do. With addSpecial, BOS/EOS are added when the vocab asks for them
// (AddBOS/AddEOS).
func (t *Tokenizer) Encode(text string, addSpecial bool) []int32 {
	return t.EncodeWith(text, addSpecial, true)
}

// EncodeWith is Encode with the choice of llama.cpp's parse_special: when
// false, only user-defined tokens are matched in the text and control-token
// text ("<|endoftext|>") is tokenized as ordinary text.
func (t *Tokenizer) EncodeWith(text string, addSpecial, parseSpecial bool) []int32 {
	st := t.states.Get().(*state)
	defer t.states.Put(st)
	var out []int32
	if addSpecial && t.v.AddBOS {
		out = append(out, t.v.BOS)
	}
	if text != "" {
		prevSpecial := true // SPM: a ▁ goes before the first text and after each special token
		for _, f := range t.partition(text, parseSpecial, st) {
			if f.id >= 0 {
				out = append(out, f.id)
				prevSpecial = true
				continue
			}
			if t.v.Model == ModelSPM {
				s := f.text
				if t.v.AddSpacePrefix && prevSpecial {
					s = " " + s
				}
				out = t.encodeSPM(out, strings.ReplaceAll(s, " ", "▁"), st)
			} else {
				out = t.encodeBPE(out, f.text, st)
			}
			prevSpecial = false
		}
	}
	if addSpecial && t.v.AddEOS {
		out = append(out, t.v.EOS)
	}
	return out
}

// Piece is the text of one token as it appears in decoded output: SPM ▁
// becomes a space, <0xXX> its byte, byte-level BPE characters their bytes;
// control, user-defined and unknown tokens give their text; unused tokens
// and ids outside the vocab give "". A piece may be part of a UTF-8 sequence.
func (t *Tokenizer) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.v.Tokens) {
		return ""
	}
	return string(t.appendPiece(nil, id))
}

func (t *Tokenizer) appendPiece(dst []byte, id int32) []byte {
	s := t.v.Tokens[id]
	switch t.types[id] {
	case TypeControl, TypeUserDefined, TypeUnknown:
		return append(dst, s...)
	case TypeUnused:
		return dst
	case TypeByte:
		if t.v.Model == ModelSPM {
			if b, ok := parseByteToken(s); ok {
				return append(dst, b)
			}
			return append(dst, s...)
		}
	}
	if t.v.Model == ModelSPM {
		return append(dst, strings.ReplaceAll(s, "▁", " ")...)
	}
	return appendUnByteLevel(dst, s)
}

// Decode concatenates the pieces of ids (see Piece; special tokens appear
// as their text, ids outside the vocab are skipped). For an SPM vocab with
// AddSpacePrefix, the space that Encode puts before the text at the start
// and after each special token is removed again, so that
// Decode(Encode(s)) == s; llama.cpp's detokenize removes only the first
// one, and llama2.c's run.c only the one after BOS.
func (t *Tokenizer) Decode(ids []int32) string {
	var buf []byte
	strip := t.stripStart()
	for _, id := range ids {
		buf = t.appendDecoded(buf, id, &strip)
	}
	return string(buf)
}

// stripStart reports whether the first text piece loses its leading space.
func (t *Tokenizer) stripStart() bool { return t.v.Model == ModelSPM && t.v.AddSpacePrefix }

// appendDecoded appends the piece of id as Decode does; strip carries
// whether the next text piece loses its leading space.
func (t *Tokenizer) appendDecoded(buf []byte, id int32, strip *bool) []byte {
	if id < 0 || int(id) >= len(t.v.Tokens) {
		return buf
	}
	n := len(buf)
	buf = t.appendPiece(buf, id)
	switch t.types[id] {
	case TypeControl, TypeUserDefined, TypeUnknown:
		*strip = t.stripStart()
	case TypeUnused:
	default:
		if *strip && len(buf) > n && buf[n] == ' ' {
			buf = append(buf[:n], buf[n+1:]...)
		}
		*strip = false
	}
	return buf
}

// A StreamDecoder decodes ids as they are generated. Add returns the text
// completed by one more id, holding back the bytes of a UTF-8 character
// that a later token finishes; Flush returns what is left. The results of
// Add and Flush, concatenated, equal Decode of all the ids.
type StreamDecoder struct {
	t       *Tokenizer
	strip   bool
	pending []byte
}

// NewStreamDecoder starts decoding a new sequence.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{t: t, strip: t.stripStart()}
}

// Add decodes one more id.
func (d *StreamDecoder) Add(id int32) string {
	d.pending = d.t.appendDecoded(d.pending, id, &d.strip)
	n := completeUTF8(d.pending)
	out := string(d.pending[:n])
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return out
}

// Flush returns the bytes held back (an unfinished UTF-8 character).
func (d *StreamDecoder) Flush() string {
	out := string(d.pending)
	d.pending = d.pending[:0]
	return out
}

// completeUTF8 returns the length of b without a trailing UTF-8 sequence
// that is valid so far but unfinished.
func completeUTF8(b []byte) int {
	for k := len(b) - 1; k >= 0 && k >= len(b)-3; k-- {
		c := b[k]
		if c < 0x80 {
			return len(b)
		}
		if c >= 0xC0 { // a lead byte: is its sequence cut short?
			if !utf8.FullRune(b[k:]) {
				return k
			}
			return len(b)
		}
	}
	return len(b)
}

// parseByteToken parses "<0xXX>".
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			b = b<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			b = b<<4 | (c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			b = b<<4 | (c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return b, true
}

func nfc(s string) string {
	if norm.NFC.IsNormalString(s) {
		return s
	}
	return norm.NFC.String(s)
}

// wordCache remembers the ids of BPE words; it is emptied when full.
type wordCache struct {
	mu sync.Mutex
	m  map[string][]int32
}

const wordCacheMax = 1 << 16

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.Lock()
	ids, ok := c.m[w]
	c.mu.Unlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= wordCacheMax {
		c.m = make(map[string][]int32)
	}
	c.m[w] = append([]int32(nil), ids...)
	c.mu.Unlock()
}
