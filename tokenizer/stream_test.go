package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// streamCase is one tokenizer StreamDecoder is checked on.
type streamCase struct {
	name string
	tok  *Tokenizer
}

// streamTokenizers are the kinds of vocabulary the repository reads: every
// llama.cpp test vocabulary FromGGUF accepts (SPM with byte fallback,
// GPT-2 byte-level BPE as Qwen and Llama 3 use), llama2.c's tokenizer.bin,
// and tokenizer.json (byte-level BPE, and SPM with byte_fallback) as
// WriteHF writes them and FromHF reads them back.
func streamTokenizers(t *testing.T) []streamCase {
	var cases []streamCase
	for _, name := range fixtureVocabs {
		tok, _ := loadGGUF(t, vocabPath(t, name))
		cases = append(cases, streamCase{"gguf " + name, tok})
	}
	v, err := FromLlama2c(storiesPath(t, "tok512.bin"), 512)
	require.NoError(t, err)
	tok512, err := New(v)
	require.NoError(t, err)
	cases = append(cases, streamCase{"llama2c tok512", tok512})
	for _, c := range []streamCase{{"qwen2", nil}, {"llama-spm", nil}, {"tok512", tok512}} {
		src := c.tok
		if src == nil {
			src, _ = loadGGUF(t, vocabPath(t, c.name))
		}
		v, err := FromHF(filepath.Dir(writeHF(t, src.Vocab())))
		require.NoError(t, err, c.name)
		tok, err := New(v)
		require.NoError(t, err, c.name)
		require.Equal(t, src.Vocab().Model, v.Model, c.name)
		cases = append(cases, streamCase{"tokenizer.json " + c.name, tok})
	}
	return cases
}

// byteIDs returns the ids of the single-byte tokens spelling s: SPM's
// <0xXX> byte-fallback tokens, byte-level BPE's one-character tokens.
func byteIDs(t *testing.T, tok *Tokenizer, s string) []int32 {
	t.Helper()
	var ids []int32
	for i := 0; i < len(s); i++ {
		piece := string(byteToRune[s[i]])
		if tok.Vocab().Model == ModelSPM {
			piece = fmt.Sprintf("<0x%02X>", s[i])
		}
		id, ok := tok.ID(piece)
		if !ok {
			t.Fatalf("no token for byte %#x (%q)", s[i], piece)
		}
		ids = append(ids, id)
	}
	return ids
}

// checkStream streams ids through a StreamDecoder and checks what a
// printer of its output relies on: the chunks (Add's results, then
// Flush's) concatenate to Decode(ids); each is valid UTF-8 when Decode's
// text is; and nothing is held back longer than needed: after each Add,
// the text not yet returned is the end of Decode(ids[:i+1]) and at most
// an unfinished UTF-8 character (valid so far). It returns the chunks.
func checkStream(t *testing.T, tok *Tokenizer, ids []int32) []string {
	t.Helper()
	want := tok.Decode(ids)
	valid := utf8.ValidString(want)
	d := tok.NewStreamDecoder()
	var chunks []string
	var sofar strings.Builder
	for i, id := range ids {
		s := d.Add(id)
		chunks = append(chunks, s)
		sofar.WriteString(s)
		if valid && !utf8.ValidString(s) {
			t.Fatalf("ids %v: Add(%d) (id %d) = %q, not valid UTF-8", ids, i, id, s)
		}
		prefix := tok.Decode(ids[:i+1])
		held, ok := strings.CutPrefix(prefix, sofar.String())
		if !ok {
			t.Fatalf("ids %v: after %d ids streamed %q, not a prefix of Decode %q", ids, i+1, sofar.String(), prefix)
		}
		if held != "" && (len(held) > 3 || utf8.FullRuneInString(held) || held[0] < 0xC0) {
			t.Fatalf("ids %v: after %d ids %q held back, more than an unfinished character", ids, i+1, held)
		}
	}
	s := d.Flush()
	chunks = append(chunks, s)
	sofar.WriteString(s)
	if valid && !utf8.ValidString(s) {
		t.Fatalf("ids %v: Flush() = %q, not valid UTF-8", ids, s)
	}
	require.Equal(t, want, sofar.String(), "ids %v: streamed text differs from Decode", ids)
	return chunks
}

// Streaming decode gives Decode's text, in pieces that are valid UTF-8
// whenever the whole text is, holding back only an unfinished character:
// llama.cpp's test texts with special tokens around them; emoji, CJK and
// accented letters spelled one byte token at a time (byte fallback, and
// byte-level BPE's byte characters), also at the start where SPM removes a
// leading space; an unfinished character at the end; random ids.
func TestStreamDecoderTokenizers(t *testing.T) {
	for _, c := range streamTokenizers(t) {
		t.Run(c.name, func(t *testing.T) {
			tok := c.tok
			v := tok.Vocab()
			if v.Model == ModelSPM && v.AddSpacePrefix {
				// "<0x20>" first: the space Decode removes at the start.
				chunks := checkStream(t, tok, append(byteIDs(t, tok, " 🦙"), tok.Encode(" ok", false)...))
				require.Equal(t, "", chunks[0], "the leading space is removed, as Decode does")
			}
			var bos []int32
			if v.BOS >= 0 {
				bos = []int32{v.BOS}
			}
			for _, s := range []string{"🦙", "你好", "é", "a🦙b", "😀😀", "𝄞 ok"} {
				ids := slices.Concat(bos, tok.Encode("Hi ", false), byteIDs(t, tok, s), tok.Encode(" then", false))
				chunks := checkStream(t, tok, ids)
				// A character of n bytes comes out with its last byte token,
				// not before.
				k := len(bos) + len(tok.Encode("Hi ", false))
				for i := 0; i < len(s); {
					_, n := utf8.DecodeRuneInString(s[i:])
					for j := i; j < i+n-1; j++ {
						require.Empty(t, chunks[k+j], "%q: byte %d of an unfinished character returned", s, j)
					}
					require.True(t, strings.HasSuffix(chunks[k+i+n-1], s[i:i+n]), "%q: chunk %q does not end with %q", s, chunks[k+i+n-1], s[i:i+n])
					i += n
				}
			}
			// Generation stopped inside a character: Flush returns its bytes.
			chunks := checkStream(t, tok, append(tok.Encode("Hi", false), byteIDs(t, tok, "\xf0\x9f\xa6")...))
			require.Equal(t, "\xf0\x9f\xa6", chunks[len(chunks)-1])
			for i, p := range readPairsIf(t, c.name) {
				checkStream(t, tok, tok.Encode("<s>"+p.text+"<|im_end|>"+p.text, false))
				if i == 40 {
					break
				}
			}
			rng := rand.New(rand.NewPCG(1, uint64(tok.Len())))
			for range 200 {
				ids := make([]int32, 1+rng.IntN(12))
				for i := range ids {
					ids[i] = rng.Int32N(int32(tok.Len()))
				}
				checkStream(t, tok, ids)
			}
		})
	}
	tok, _ := loadGGUF(t, vocabPath(t, "qwen2"))
	d := tok.NewStreamDecoder()
	require.Empty(t, d.Add(-5)+d.Add(99999999)+d.Flush(), "invalid ids decode to text")
}

// readPairsIf is readPairs for a "gguf NAME" case, none for the others.
func readPairsIf(t *testing.T, name string) []testPair {
	if n, ok := strings.CutPrefix(name, "gguf "); ok {
		return readPairs(t, n)
	}
	return nil
}

// FuzzStreamDecoder: for any ids, streaming gives Decode's text and holds
// back no more than an unfinished character (checkStream).
func FuzzStreamDecoder(f *testing.F) {
	toks := fuzzTokenizers(f)
	names := []string{"qwen2", "qwen35", "llama-spm", "gpt-2", "tok512"}
	f.Add(uint8(0), []byte{0xf0, 0x9f, 0xa6, 0x99})
	f.Add(uint8(2), []byte{0, 1, 0x03, 0xf3, 0x03, 0xa0, 0x03, 0xa9})
	f.Add(uint8(4), []byte{0, 1, 0x00, 0xf3, 0x00, 0xa0, 0x01, 0x9a})
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		tok := toks[names[int(which)%len(names)]]
		var ids []int32
		for i := 0; i+1 < len(data); i += 2 {
			ids = append(ids, int32(data[i])<<8|int32(data[i+1]))
		}
		if len(ids) == 0 || len(ids) > 64 {
			return
		}
		for i := range ids {
			ids[i] %= int32(tok.Len() + 2) // a few invalid ids too
		}
		checkStream(t, tok, ids)
	})
}

// completeUTF8 keeps back exactly a trailing character that is valid so
// far but unfinished; bytes that cannot start or continue one pass.
func TestCompleteUTF8(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"a", 1}, {"a\xe2", 1}, {"a\xe2\x96", 1}, {"a\xe2\x96\x81", 4}, {"\xf0\x9f\xa6", 0},
		{"\xf0\x9f\xa6\x99", 4}, {"\xff", 1}, {"\x80", 1}, {"a\xc3", 1}, {"\xc3(", 2},
		{"ab\xf0\x9f\xa6\x99", 6}, {"\xf0\x9f\xa6\x99\xf0", 4}, {"\x80\x80\x80", 3},
		{"\xc0", 1}, {"\xc1", 1}, {"\xf5", 1}, // never lead bytes
		{"\xed\xa0", 2}, {"\xe0\x80", 2}, {"\xf4\x90", 2}, // a surrogate, overlong, above U+10FFFF: invalid already
		{"\xed\x9f", 0}, {"\xf4\x8f\xbf", 0}, // valid so far
	} {
		require.Equal(t, c.want, completeUTF8([]byte(c.in)), "completeUTF8(%q)", c.in)
	}
}
