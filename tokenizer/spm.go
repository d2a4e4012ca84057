package tokenizer

// encodeSPM appends the ids of one text fragment, already escaped (' ' → ▁)
// and prefixed, following llama.cpp's llm_tokenizer_spm: start from UTF-8
// characters, repeatedly join the adjacent pair whose joined text is the
// token with the highest score (leftmost among equals), and emit the
// remaining symbols, each a token or, failing that, its bytes as <0xXX>.
//
// (llama.cpp's resegment step can only split a final symbol that is not a
// token, and every joined symbol is a token, so it reduces to the byte
// fallback here.)
func (t *Tokenizer) encodeSPM(dst []int32, text string, st *state) []int32 {
	st.syms = splitChars(st.syms, text)
	merge(st.syms, &st.queue, text, func(_, _ *symbol, ab string) (float64, int32, bool) {
		id, ok := t.ids[ab]
		if !ok {
			return 0, 0, false
		}
		return -float64(t.score(id)), id, true
	})
	for i := 0; i >= 0 && len(st.syms) > 0; i = st.syms[i].next {
		s := st.syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := t.ids[piece]; ok {
			dst = append(dst, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			if id, ok := t.byteToken(piece[j]); ok {
				dst = append(dst, id)
			}
		}
	}
	return dst
}

// byteToken is the token for one raw byte: <0xXX>, else the byte as a
// one-character token, else UNK (none if the vocab has no UNK).
func (t *Tokenizer) byteToken(b byte) (int32, bool) {
	if id := t.byteIDs[b]; id >= 0 {
		return id, true
	}
	if id, ok := t.ids[string([]byte{b})]; ok {
		return id, true
	}
	return t.v.UNK, t.v.UNK >= 0
}
