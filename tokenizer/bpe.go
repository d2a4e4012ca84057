package tokenizer

import "unicode/utf8"

// GPT-2 byte-level mapping: every byte becomes a printable character. Bytes
// 33-126, 161-172 and 174-255 stand for themselves; the other 68 bytes, in
// increasing order, become U+0100 onwards (so ' ' is 'Ġ', '\n' is 'Ċ').
var (
	byteToRune [256]rune
	runeToByte [256 + 68]int16 // -1 where the rune is not a mapped byte
)

func init() {
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	n := rune(0)
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= 33 && b <= 126 || b >= 161 && b <= 172 || b >= 174) {
			r = 256 + n
			n++
		}
		byteToRune[b] = r
		runeToByte[r] = int16(b)
	}
}

// byteLevel maps the bytes of s to their characters.
func byteLevel(s string) string {
	buf := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		buf = utf8.AppendRune(buf, byteToRune[s[i]])
	}
	return string(buf)
}

// appendUnByteLevel appends the bytes that the characters of s stand for;
// characters outside the mapping are kept as they are.
func appendUnByteLevel(dst []byte, s string) []byte {
	for _, r := range s {
		if r >= 0 && int(r) < len(runeToByte) && runeToByte[r] >= 0 {
			dst = append(dst, byte(runeToByte[r]))
		} else {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}

type mergeKey struct{ left, right string }

// mergeResult is a merge's rank and the id of the token it makes (-1 if
// the joined text is not a token).
type mergeResult struct{ rank, id int32 }

func pairKey(l, r int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// symbol is a byte range [start, start+n) of the word being merged, linked
// to its live neighbours, and its token id (-1: not a token). n == 0 marks
// a symbol merged into its left neighbour.
type symbol struct {
	start, n   int
	prev, next int
	id         int32
}

// bigram is a candidate merge of symbols left and right (its neighbour).
type bigram struct {
	left, right int
	key         float64 // lower merges first: rank for BPE, -score for SPM
	size        int     // length of the merged text when the bigram was made
	id          int32   // token id of the merged text
}

// bigramQueue is a binary min-heap on (key, left): the best merge first and,
// among equals, the leftmost, as llama.cpp's priority queues order them.
type bigramQueue []bigram

func (q bigramQueue) less(i, j int) bool {
	return q[i].key < q[j].key || q[i].key == q[j].key && q[i].left < q[j].left
}

func (q *bigramQueue) push(b bigram) {
	*q = append(*q, b)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *bigramQueue) pop() bigram {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h.less(l, m) {
			m = l
		}
		if r < len(h) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// splitChars fills syms with one symbol per UTF-8 character of word, the
// length taken from the lead byte as llama.cpp's unicode_len_utf8 does (an
// invalid lead byte is a one-byte symbol).
func splitChars(syms []symbol, word string) []symbol {
	syms = syms[:0]
	for off := 0; off < len(word); {
		n := utf8LenLead(word[off])
		if n > len(word)-off {
			n = len(word) - off
		}
		syms = append(syms, symbol{start: off, n: n, prev: len(syms) - 1, next: len(syms) + 1, id: -1})
		off += n
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	return syms
}

func utf8LenLead(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	default:
		return 4
	}
}

// merge runs the merge loop over syms: pop the best bigram, skip it if
// either side changed since it was queued, else join right into left and
// queue the new bigrams on both sides. pair scores a candidate given its
// two symbols and their joined text, returning the merged token id
// (ok=false: no such merge).
func merge(syms []symbol, q *bigramQueue, word string, pair func(l, r *symbol, ab string) (key float64, id int32, ok bool)) {
	add := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		ab := word[syms[l].start : syms[r].start+syms[r].n]
		if k, id, ok := pair(&syms[l], &syms[r], ab); ok {
			q.push(bigram{left: l, right: r, key: k, size: len(ab), id: id})
		}
	}
	*q = (*q)[:0]
	for i := 1; i < len(syms); i++ {
		add(i-1, i)
	}
	for len(*q) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		l.id = b.id
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		add(l.prev, b.left)
		add(b.left, l.next)
	}
}

// encodeBPE appends the ids of one text fragment (no special tokens in it).
func (t *Tokenizer) encodeBPE(dst []int32, text string, st *state) []int32 {
	for _, w := range t.pre.split(text, st) {
		dst = t.bpeWord(dst, w, st)
	}
	return dst
}

// split normalises text and cuts it into words (raw text, not byte-level).
func (p *preTokenizer) split(text string, st *state) []string {
	if p.nfc {
		text = nfc(text)
	}
	words := append(st.words[:0], text)
	for i, s := range p.stages {
		if i == p.byteLevelAt {
			for j, w := range words {
				words[j] = byteLevel(w)
			}
		}
		next := st.words2[:0]
		for _, w := range words {
			next = s.split(&st.cps, w, next)
		}
		words, st.words2 = next, words
	}
	if p.byteLevelAt < len(p.stages) {
		// Stages after the byte-level mapping split mapped text: map back.
		for j, w := range words {
			words[j] = string(appendUnByteLevel(nil, w))
		}
	}
	st.words = words
	return words
}

// bpeWord merges one word by merge rank and appends its ids. The word is
// raw text: each byte is one byte-level character, so symbols are bytes.
func (t *Tokenizer) bpeWord(dst []int32, word string, st *state) []int32 {
	if len(word) == 1 && t.charIDs[word[0]] >= 0 {
		return append(dst, t.charIDs[word[0]])
	}
	if t.pre.ignoreMerges {
		if id, ok := t.ids[byteLevel(word)]; ok {
			return append(dst, id)
		}
	}
	if ids, ok := t.cache.get(word); ok {
		return append(dst, ids...)
	}
	start := len(dst)
	syms := st.syms[:0]
	for i := 0; i < len(word); i++ {
		syms = append(syms, symbol{start: i, n: 1, prev: i - 1, next: i + 1, id: t.charIDs[word[i]]})
	}
	syms[len(syms)-1].next = -1
	st.syms = syms
	merge(syms, &st.queue, word, func(l, r *symbol, ab string) (float64, int32, bool) {
		if l.id >= 0 && r.id >= 0 {
			m, ok := t.ranks[pairKey(l.id, r.id)]
			return float64(m.rank), m.id, ok
		}
		return t.slowRank(word[l.start:l.start+l.n], word[r.start:r.start+r.n])
	})
	for i := 0; i >= 0; i = syms[i].next {
		s := syms[i]
		if s.id >= 0 {
			dst = append(dst, s.id)
			continue
		}
		// Text that is not a token (a vocabulary without every byte, or a
		// merge whose result is missing): its characters, else UNK.
		for _, r := range byteLevel(word[s.start : s.start+s.n]) {
			if id, ok := t.ids[string(r)]; ok {
				dst = append(dst, id)
			} else if t.v.UNK >= 0 {
				dst = append(dst, t.v.UNK)
			}
		}
	}
	t.cache.put(word, dst[start:])
	return dst
}

// slowRank looks up a merge whose sides are not both tokens.
func (t *Tokenizer) slowRank(a, b string) (float64, int32, bool) {
	r, ok := t.strRanks[mergeKey{byteLevel(a), byteLevel(b)}]
	if !ok {
		return 0, 0, false
	}
	id, found := t.ids[byteLevel(a+b)]
	if !found {
		id = -1
	}
	return float64(r), id, true
}
