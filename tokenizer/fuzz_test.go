package tokenizer

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/qnnprep/qnnprep/gguf"
)

// fuzzTokenizers are the vocabularies FuzzEncode runs every input through.
func fuzzTokenizers(f *testing.F) map[string]*Tokenizer {
	toks := map[string]*Tokenizer{}
	for _, name := range []string{"qwen2", "qwen35", "llama-spm", "gpt-2"} {
		toks[name], _ = loadGGUF(f, vocabPath(f, name))
	}
	v, err := FromLlama2c(storiesPath(f, "tok512.bin"), 512)
	if err != nil {
		f.Fatal(err)
	}
	if toks["tok512"], err = New(v); err != nil {
		f.Fatal(err)
	}
	return toks
}

// FuzzEncode: no panic, every id valid, and Decode(Encode(s)) gives s back
// (its NFC form for NFC vocabularies): byte-level BPE for every s, invalid
// UTF-8 included; SPM for valid UTF-8 without U+2581 (which SPM cannot tell
// from a space).
func FuzzEncode(f *testing.F) {
	toks := fuzzTokenizers(f)
	for _, s := range []string{"", " ", "Hello world", "<|im_start|>user\nhi<|im_end|>", "<s>a</s>", "a   b\n\n\tc",
		"e\u0301 ünï 日本語 🦙", "\xff\xfe broken \xc3", "'s 'LL 123456", "\u2581x", "<0x41>"} {
		f.Add(s)
	}
	if inp, err := os.ReadFile(vocabPath(f, "qwen35") + ".inp"); err == nil {
		for _, s := range strings.Split(string(inp), "\n__ggml_vocab_test__\n") {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, tok := range toks {
			for _, parse := range []bool{true, false} {
				ids := tok.EncodeWith(s, true, parse)
				for _, id := range ids {
					if err := tok.Validate(id); err != nil {
						t.Fatalf("%s: %q: %v", name, s, err)
					}
				}
				ids = tok.EncodeWith(s, false, parse)
				got := tok.Decode(ids)
				want, ok := expectedDecode(tok, s)
				if !utf8.ValidString(s) && tok.v.Model == ModelSPM {
					ok = false
				}
				if ok && got != want {
					t.Fatalf("%s (parseSpecial=%v): Decode(Encode(%q)) = %q, ids %v", name, parse, s, got, ids)
				}
			}
		}
	})
}

// FuzzParseLlama2c: arbitrary tokenizer.bin bytes give a vocab or an
// error, never a panic or a huge allocation.
func FuzzParseLlama2c(f *testing.F) {
	if data, err := os.ReadFile(storiesPath(f, "tok512.bin")); err == nil {
		f.Add(data, uint16(512))
		f.Add(data[:100], uint16(0))
	}
	f.Add([]byte{7, 0, 0, 0}, uint16(3))
	f.Add([]byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		v, err := parseLlama2c(data, int(n))
		if err != nil {
			return
		}
		tok, err := New(v)
		if err != nil {
			t.Fatalf("parsed vocab rejected by New: %v", err)
		}
		tok.Decode(tok.Encode("Once upon a time <s>", true))
	})
}

// FuzzParseHF: arbitrary tokenizer.json bytes give a vocab or an error.
func FuzzParseHF(f *testing.F) {
	f.Add([]byte(`{"added_tokens":[{"id":3,"content":"<|end|>","special":true}],"normalizer":{"type":"NFC"},
		"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},
		"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]]}}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"Ġ":0},"merges":[]},"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},{"type":"ByteLevel"}]}}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":16777215}},"pre_tokenizer":{"type":"ByteLevel"}}`))
	for _, v := range fuzzVocabs {
		data, err := WriteHF(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parseHF(data, dir)
		if err != nil {
			return
		}
		tok, err := New(v)
		if err != nil {
			t.Fatalf("parsed vocab rejected by New: %v", err)
		}
		tok.Decode(tok.Encode("ab 12 <|end|>", true))
	})
}

// FuzzHFSidecars: arbitrary tokenizer_config.json and config.json beside
// a valid tokenizer.json give a vocab New accepts (the specials they name
// inside the vocabulary) or an error naming the file, never a panic.
func FuzzHFSidecars(f *testing.F) {
	f.Add([]byte(`{"bos_token":"<s>","eos_token":{"content":"</s>"},"add_bos_token":true,"add_eos_token":false}`),
		[]byte(`{"vocab_size":7,"bos_token_id":1,"eos_token_id":[2,5],"pad_token_id":null}`))
	f.Add([]byte(`{"unk_token":"<unk>","pad_token":"nope"}`), []byte(`{"text_config":{"vocab_size":7,"eos_token_id":99}}`))
	f.Add([]byte(`{"bos_token":7}`), []byte(`{"vocab_size":-1}`))
	f.Add([]byte(`[]`), []byte(`{"bos_token_id":"x"}`))
	tj, err := WriteHF(fuzzVocabs[1])
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tokCfg, cfg []byte) {
		dir := t.TempDir()
		for name, data := range map[string][]byte{"tokenizer_config.json": tokCfg, "config.json": cfg} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		v, err := parseHF(tj, dir)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "config.json") && !strings.Contains(msg, "tokenizer") {
				t.Fatalf("error names no file: %v", err)
			}
			return
		}
		if _, err := New(v); err != nil {
			t.Fatalf("parsed vocab rejected by New: %v", err)
		}
	})
}

var fuzzVocabs = []*Vocab{
	{Model: ModelBPE, Pre: "qwen2", Tokens: []string{"a", "b", "ab", "<|x|>"}, Types: []int32{1, 1, 1, 3}, Merges: []string{"a b"}, BOS: -1, EOS: 3, UNK: -1, PAD: -1},
	{Model: ModelSPM, Pre: "default", Tokens: []string{"<unk>", "<s>", "</s>", "▁", "a", "▁a", "<0x62>"}, Scores: []float32{0, 0, 0, -1, -2, -0.5, 0},
		Types: []int32{2, 3, 3, 1, 1, 1, 6}, BOS: 1, EOS: 2, UNK: 0, PAD: -1, AddBOS: true, AddSpacePrefix: true},
}

// FuzzFromGGUF: any GGUF the gguf package accepts gives a vocab or an error
// from FromGGUF, and a vocab it accepts tokenizes without panicking and
// gives a tokenizer.json (or an error) that reads back.
func FuzzFromGGUF(f *testing.F) {
	dir := f.TempDir()
	for _, v := range fuzzVocabs {
		var buf bytes.Buffer
		w := &gguf.Writer{Metadata: v.GGUFMetadata()}
		if _, err := w.WriteTo(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		file, err := gguf.Parse(bytes.NewReader(in), int64(len(in)), "fuzz.gguf")
		if err != nil {
			return
		}
		v, err := FromGGUF(file.Metadata)
		if err != nil {
			return
		}
		tok, err := New(v)
		if err != nil {
			t.Fatalf("FromGGUF vocab rejected by New: %v", err)
		}
		tok.Decode(tok.Encode(" ab b<|x|> ", true))
		data, err := WriteHF(v)
		if err != nil {
			return
		}
		back, err := parseHF(data, dir)
		if err != nil {
			t.Fatalf("WriteHF output does not read back: %v", err)
		}
		if len(back.Tokens) != len(v.Tokens) || back.AddBOS != v.AddBOS {
			t.Fatalf("read back %d tokens, AddBOS %v; wrote %d, %v", len(back.Tokens), back.AddBOS, len(v.Tokens), v.AddBOS)
		}
	})
}

// A float32 written as bits, for building llama2.c files in tests.
func f32le(x float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(x)) }
