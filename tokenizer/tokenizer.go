package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"sync"

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
