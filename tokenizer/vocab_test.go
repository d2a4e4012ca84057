package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tinySPM() *Vocab {
	return &Vocab{Model: ModelSPM, Pre: "default",
		Tokens: []string{"<unk>", "<s>", "</s>", "▁", "a", "▁a", "<0x62>", "<x>"},
		Scores: []float32{0, 0, 0, -1, -2, -0.5, 0, 0},
		Types:  []int32{2, 3, 3, 1, 1, 1, 6, 4},
		BOS:    1, EOS: 2, UNK: 0, PAD: -1, AddBOS: true, AddSpacePrefix: true}
}

func TestNewErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(v *Vocab)
		err  string
	}{
		{"ok", func(v *Vocab) {}, ""},
		{"no model", func(v *Vocab) { v.Model = "" }, "vocab has no model"},
		{"bert", func(v *Vocab) { v.Model = "bert" }, `unsupported tokenizer model "bert"`},
		{"no tokens", func(v *Vocab) { v.Tokens, v.Scores, v.Types = nil, nil, nil }, "no tokens"},
		{"scores", func(v *Vocab) { v.Scores = v.Scores[:3] }, "3 scores for 8 tokens"},
		{"types", func(v *Vocab) { v.Types = v.Types[:3] }, "3 token types for 8 tokens"},
		{"bad type", func(v *Vocab) { v.Types[4] = 9 }, `token 4 ("a") has type 9`},
		{"bos range", func(v *Vocab) { v.BOS = 8 }, "BOS id 8 out of range"},
		{"eos range", func(v *Vocab) { v.EOS = -2 }, "EOS id -2 out of range"},
		{"add bos", func(v *Vocab) { v.BOS = -1 }, "AddBOS set but the vocab has no BOS"},
		{"bpe pre", func(v *Vocab) { v.Model, v.Pre = ModelBPE, "klingon" }, `unknown pre-tokenizer "klingon"`},
		{"bpe merge", func(v *Vocab) { v.Model, v.Pre, v.Merges = ModelBPE, "gpt-2", []string{"a"} }, `merge 0 ("a")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := tinySPM()
			c.edit(v)
			_, err := New(v)
			checkErr(t, err, c.err)
		})
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}

func TestTinySPM(t *testing.T) {
	tok, err := New(tinySPM())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text         string
		add, special bool
		want         []int32
	}{
		{"a", false, true, []int32{5}},     // ▁a
		{"a", true, true, []int32{1, 5}},   // BOS ▁a
		{"", true, true, []int32{1}},       // llama.cpp: just BOS
		{"", false, true, nil},             //
		{"aa", false, true, []int32{5, 4}}, // ▁a a
		{"b", false, true, []int32{3, 6}},  // ▁ <0x62>
		{"c", false, true, []int32{3, 0}},  // ▁, no <0x63>: UNK
		{"a</s>a", false, true, []int32{5, 2, 5}},
		{"a</s>a", false, false, []int32{5, 0, 0, 0, 0, 4}}, // control text is plain text; <, /, s, > have no token or <0xXX>: UNK
		{"a<x>a", false, false, []int32{5, 7, 5}},           // user-defined tokens are split out even without parse_special
	} {
		got := tok.EncodeWith(c.text, c.add, c.special)
		if !slices.Equal(got, c.want) {
			t.Errorf("EncodeWith(%q, %v, %v) = %v, want %v", c.text, c.add, c.special, got, c.want)
		}
	}
	if got := tok.Decode([]int32{1, 5, 4, 2, 5, 6, 99, -1}); got != "<s>aa</s>ab" {
		t.Errorf("Decode = %q", got)
	}
	if err := tok.Validate(8); err == nil || !strings.Contains(err.Error(), "out of range [0, 8)") {
		t.Errorf("Validate(8) = %v", err)
	}
	if tok.Validate(7) != nil || tok.Piece(6) != "b" || tok.Piece(3) != " " || tok.Piece(8) != "" {
		t.Error("Validate/Piece")
	}
}

// Qwen ChatML: special tokens in the text become their ids only with
// parse_special; user text around them is tokenized as usual.
func TestParseSpecialQwen(t *testing.T) {
	tok, _ := loadGGUF(t, vocabPath(t, "qwen2"))
	const start, end = 151644, 151645 // <|im_start|>, <|im_end|> (model-architectures.md §8.4)
	got := tok.Encode("<|im_start|>user\nhi<|im_end|>\n", false)
	want := append(append([]int32{start}, tok.Encode("user\nhi", false)...), end)
	want = append(want, tok.Encode("\n", false)...)
	if !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	plain := tok.EncodeWith("<|im_start|>", false, false)
	if slices.Contains(plain, start) || len(plain) < 3 {
		t.Errorf("EncodeWith(parseSpecial=false) = %v, want ordinary tokens", plain)
	}
	if s := tok.Decode(plain); s != "<|im_start|>" {
		t.Errorf("Decode = %q", s)
	}
	if id, ok := tok.ID("<|endoftext|>"); !ok || id != 151643 {
		t.Errorf("ID(<|endoftext|>) = %d, %v", id, ok)
	}
}

func TestFromGGUFErrors(t *testing.T) {
	good := tinySPM().GGUFMetadata()
	for _, c := range []struct {
		name string
		edit func(md *gguf.Metadata)
		err  string
	}{
		{"ok", func(md *gguf.Metadata) {}, ""},
		{"no model", func(md *gguf.Metadata) { md.Delete(keyModel) }, "has no tokenizer.ggml.model"},
		{"model type", func(md *gguf.Metadata) { md.Set(keyModel, uint32(1)) }, "tokenizer.ggml.model is UINT32, want a string"},
		{"bert", func(md *gguf.Metadata) { md.Set(keyModel, "bert") }, `"bert": unsupported`},
		{"tokens", func(md *gguf.Metadata) { md.Set(keyTokens, []int32{1}) }, "tokenizer.ggml.tokens is ARRAY of INT32 (1 elements), want a string array"},
		{"scores", func(md *gguf.Metadata) { md.Set(keyScores, []float32{1}) }, "want a float32 array of 8 scores"},
		{"types", func(md *gguf.Metadata) { md.Set(keyTypes, []string{"x"}) }, "want an int32 array of 8 token types"},
		{"bad type", func(md *gguf.Metadata) { md.Set(keyTypes, []int32{1, 1, 1, 1, 1, 1, 1, 77}) }, "has type 77"},
		{"bos type", func(md *gguf.Metadata) { md.Set(keyBOS, "1") }, "bos_token_id is STRING, want an integer"},
		{"add_bos type", func(md *gguf.Metadata) { md.Set(keyAddBOS, uint8(1)) }, "add_bos_token is UINT8, want a bool"},
		{"pre type", func(md *gguf.Metadata) { md.Set(keyPre, 3.5) }, "tokenizer.ggml.pre is FLOAT64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			md := append(gguf.Metadata(nil), good...)
			c.edit(&md)
			_, err := FromGGUF(md)
			checkErr(t, err, c.err)
		})
	}
}

// llama.cpp's defaults apply when keys are missing, and an id outside the
// vocabulary (0xFFFFFFFF) keeps the default.
func TestFromGGUFDefaults(t *testing.T) {
	md := gguf.Metadata{{Key: keyModel, Value: "llama"}, {Key: keyTokens, Value: tinySPM().Tokens},
		{Key: keyBOS, Value: uint32(0xFFFFFFFF)}, {Key: "tokenizer.chat_template", Value: "{{x}}"}}
	v, err := FromGGUF(md)
	if err != nil {
		t.Fatal(err)
	}
	if v.BOS != 1 || v.EOS != 2 || v.UNK != 0 || v.PAD != -1 || !v.AddBOS || v.AddEOS || !v.AddSpacePrefix || v.Pre != "default" {
		t.Errorf("defaults: %+v", summary(v))
	}
	md.Set(keyPre, "")
	if v, err := FromGGUF(md); err != nil || v.Pre != "default" {
		t.Errorf("empty pre: %v %v", v, err)
	}
	if len(v.Extra) != 1 || v.Extra[0].Key != "tokenizer.chat_template" {
		t.Errorf("Extra = %v", v.Extra)
	}
	if tmpl, _ := v.GGUFMetadata().String("tokenizer.chat_template"); tmpl != "{{x}}" {
		t.Error("chat template not written back")
	}
}

func TestFromLlama2cErrors(t *testing.T) {
	tok512, err := os.ReadFile(storiesPath(t, "tok512.bin"))
	if err != nil {
		t.Fatal(err)
	}
	rec := func(score float32, s string) []byte {
		b := f32le(score)
		b = append(b, byte(len(s)), 0, 0, 0)
		return append(b, s...)
	}
	three := append([]byte{7, 0, 0, 0}, append(append(rec(0, "<unk>"), rec(0, "\n<s>\n")...), rec(0, "\n</s>\n")...)...)
	for _, c := range []struct {
		name string
		data []byte
		n    int
		err  string
	}{
		{"all tokens", tok512, 0, ""},
		{"three", three, 3, ""},
		{"short header", []byte{1}, 0, "too short"},
		{"too many", tok512, 100000, "room for at most"},
		{"truncated", tok512[:len(tok512)-3], 512, "truncated"},
		{"long token", append([]byte{2, 0, 0, 0}, rec(0, "abc")...), 1, "length 3 invalid"},
		{"negative size", tok512, -1, "negative"},
		{"too few", three[:4+len(rec(0, "<unk>"))], 0, "at least <unk>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tok.bin")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			v, err := FromLlama2c(path, c.n)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if v.Tokens[1] != "<s>" || v.Types[2] != TypeControl {
					t.Errorf("tokens %q", v.Tokens[:3])
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "tok.bin") {
				t.Errorf("error %v, want %q and the file name", err, c.err)
			}
		})
	}
}

func TestEOG(t *testing.T) {
	for _, c := range []struct {
		name string
		want []int32
	}{
		{"qwen2", []int32{128247, 151643, 151645}}, // </s> (llama.cpp's EOT pick), <|endoftext|> (EOS), <|im_end|> (§8.4)
		{"llama-bpe", []int32{128001, 128009}},     // <|end_of_text|> (EOS), <|eot_id|>
		{"llama-spm", []int32{2}},
	} {
		tok, _ := loadGGUF(t, vocabPath(t, c.name))
		if got := tok.EOG(); !slices.Equal(got, c.want) {
			t.Errorf("%s: EOG = %v, want %v", c.name, got, c.want)
		}
	}
	tok, _ := loadGGUF(t, vocabPath(t, "qwen2"))
	if !tok.IsEOG(151645) || tok.IsEOG(151644) {
		t.Error("IsEOG")
	}
}

// checkErr requires err to be nil when want is empty, else to contain want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		require.NoError(t, err)
		return
	}
	assert.ErrorContains(t, err, want)
}
