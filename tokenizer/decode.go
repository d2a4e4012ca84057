package tokenizer

// Decoding: token pieces, Decode and streaming decode.

import (
	"strings"
	"unicode/utf8"
)

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
