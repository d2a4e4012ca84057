package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The Split regexes as the reference (model-architectures.md §8.2) and the
// published tokenizer.json files spell them.
var refRegex = map[string]string{
	"qwen2":     `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"qwen35":    `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"llama-bpe": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

// writeHFDir writes a Hugging Face tokenizer directory holding the
// vocabulary of a fixture GGUF, laid out as the published Qwen3 and Llama 3
// tokenizer.json files are (added tokens apart from the BPE vocab, merges
// as pairs or strings, NFC normalizer for Qwen, a TemplateProcessing
// post-processor adding BOS for Llama 3).
func writeHFDir(t *testing.T, v *Vocab, pairs bool) string {
	t.Helper()
	dir := t.TempDir()
	vocab := map[string]int{}
	var added []map[string]any
	for i, s := range v.Tokens {
		switch v.Type(int32(i)) {
		case TypeNormal:
			vocab[s] = i
		case TypeControl, TypeUserDefined:
			added = append(added, map[string]any{"id": i, "content": s, "special": v.Type(int32(i)) == TypeControl,
				"single_word": false, "lstrip": false, "rstrip": false, "normalized": false})
		}
	}
	var merges any = v.Merges
	if pairs {
		var p [][]string
		for _, m := range v.Merges {
			l, r, _ := splitMerge(m)
			p = append(p, []string{l, r})
		}
		merges = p
	}
	pre := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	if re, ok := refRegex[v.Pre]; ok {
		pre = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": re}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}}
	}
	var normalizer, post any
	if v.Pre == "qwen2" {
		normalizer = map[string]any{"type": "NFC"}
	}
	if v.AddBOS {
		bos := v.Tokens[v.BOS]
		post = map[string]any{"type": "Sequence", "processors": []any{
			map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
			map[string]any{"type": "TemplateProcessing",
				"single": []any{map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}}},
		}}
	}
	tj := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": added, "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post,
		"decoder": map[string]any{"type": "ByteLevel"},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "fuse_unk": false, "byte_fallback": false,
			"ignore_merges": v.Pre == "llama-bpe", "vocab": vocab, "merges": merges},
	}
	tc := map[string]any{"bos_token": v.Tokens[v.BOS], "eos_token": v.Tokens[v.EOS], "clean_up_tokenization_spaces": false}
	if v.PAD >= 0 {
		tc["pad_token"] = v.Tokens[v.PAD]
	}
	writeJSON(t, filepath.Join(dir, "tokenizer.json"), tj)
	writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), tc)
	writeJSON(t, filepath.Join(dir, "config.json"), map[string]any{"vocab_size": len(v.Tokens), "bos_token_id": 1})
	return dir
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A tokenizer.json carrying a fixture's vocabulary gives back the same
// vocabulary as the GGUF llama.cpp converted, and the same ids.
func TestFromHFMatchesGGUF(t *testing.T) {
	for _, c := range []struct {
		name  string
		pairs bool
	}{{"qwen2", true}, {"llama-bpe", false}, {"gpt-2", false}} {
		t.Run(c.name, func(t *testing.T) {
			gg, _ := loadGGUF(t, vocabPath(t, c.name))
			want := gg.Vocab()
			got, err := FromHF(writeHFDir(t, want, c.pairs))
			if err != nil {
				t.Fatal(err)
			}
			if got.Pre != want.Pre {
				t.Errorf("Pre = %q, want %q", got.Pre, want.Pre)
			}
			if !slices.Equal(got.Tokens, want.Tokens) || !slices.Equal(got.Merges, want.Merges) {
				t.Fatal("tokens or merges differ")
			}
			for i := range got.Types {
				if got.Types[i] != want.Type(int32(i)) {
					t.Fatalf("token %d %q: type %d, want %d", i, got.Tokens[i], got.Types[i], want.Type(int32(i)))
				}
			}
			if got.BOS != want.BOS || got.EOS != want.EOS || got.AddBOS != want.AddBOS || got.AddEOS != want.AddEOS {
				t.Errorf("specials: got BOS %d EOS %d add %v/%v, want BOS %d EOS %d add %v/%v",
					got.BOS, got.EOS, got.AddBOS, got.AddEOS, want.BOS, want.EOS, want.AddBOS, want.AddEOS)
			}
			tok, err := New(got)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range readPairs(t, c.name) {
				if ids := tok.Encode(p.text, false); !slices.Equal(ids, p.ids) {
					t.Errorf("test %d %q: got %v, want %v", i, p.text, ids, p.ids)
				}
			}
		})
	}
}

// Published tokenizer directories, when present (QNNPREP_HF_TOKENIZERS is a
// list of "fixture=dir" pairs, e.g. qwen2=/path/Qwen3-0.6B), must give the
// fixture's ids for its test strings.
func TestFromHFPublished(t *testing.T) {
	eachHFDir(t, func(t *testing.T, name, dir string, v *Vocab, tok *Tokenizer) {
		t.Logf("%s: %d tokens, pre %s, BOS %d EOS %d PAD %d, addBOS %v", dir, tok.Len(), v.Pre, v.BOS, v.EOS, v.PAD, v.AddBOS)
		for i, p := range readPairs(t, name) {
			if ids := tok.Encode(p.text, false); !slices.Equal(ids, p.ids) {
				t.Errorf("test %d %q: got %v, want %v", i, p.text, ids, p.ids)
			}
			if got := tok.Decode(tok.Encode(p.text, false)); got != p.text {
				t.Errorf("test %d: round trip %q", i, got)
			}
		}
	})
}

// eachHFDir runs f in a subtest for each published tokenizer directory
// named in QNNPREP_HF_TOKENIZERS ("fixture=dir" pairs), with its vocabulary
// and tokenizer; it skips when the variable is not set.
func eachHFDir(t *testing.T, f func(t *testing.T, name, dir string, v *Vocab, tok *Tokenizer)) {
	env := os.Getenv("QNNPREP_HF_TOKENIZERS")
	if env == "" {
		t.Skip("QNNPREP_HF_TOKENIZERS not set")
	}
	for _, kv := range strings.Fields(env) {
		name, dir, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("QNNPREP_HF_TOKENIZERS entry %q: want fixture=dir", kv)
		}
		t.Run(name, func(t *testing.T) {
			v, err := FromHF(dir)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := New(v)
			if err != nil {
				t.Fatal(err)
			}
			f(t, name, dir, v, tok)
		})
	}
}

func TestHFPreTokenizer(t *testing.T) {
	split := func(re string) string {
		b, _ := json.Marshal(re)
		return `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` + string(b) +
			`},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]}`
	}
	for _, c := range []struct{ json, want, err string }{
		{split(refRegex["qwen2"]), "qwen2", ""},
		{split(refRegex["qwen35"]), "qwen35", ""},
		{split(refRegex["llama-bpe"]), "llama-bpe", ""},
		{`{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`, "gpt-2", ""},
		{`{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},{"type":"ByteLevel","add_prefix_space":false,"use_regex":true}]}`, "starcoder", ""},
		{split(`\p{L}+`), "", "not one this package knows"},
		{`{"type":"Metaspace","replacement":"▁"}`, "", "want a ByteLevel"},
		{`{"type":"ByteLevel","add_prefix_space":true}`, "", "want a ByteLevel"},
		{`null`, "", "no pre_tokenizer"},
		{`{"type":"Sequence","pretokenizers":[{"type":"Punctuation"},{"type":"ByteLevel","use_regex":true}]}`, "", "Punctuation+ByteLevel is not supported"},
	} {
		got, err := hfPreTokenizer(json.RawMessage(c.json))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.json, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.json, got, err, c.want)
		}
	}
}

func TestFromHFErrors(t *testing.T) {
	good := `{"added_tokens":[{"id":3,"content":"<|end|>","special":true}],"normalizer":null,
		"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},
		"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`
	for _, c := range []struct{ name, tj, cfg, tc, err string }{
		{"ok", good, "", `{"eos_token":"<|end|>","add_bos_token":false}`, ""},
		{"not json", `{`, "", "", "tokenizer.json: unexpected end"},
		{"wordpiece", `{"model":{"type":"WordPiece"}}`, "", "", `model type "WordPiece"`},
		{"byte fallback", `{"model":{"type":"BPE","byte_fallback":true}}`, "", "", "byte_fallback"},
		{"normalizer", strings.Replace(good, `"normalizer":null`, `"normalizer":{"type":"Lowercase"}`, 1), "", "", "normalizer Lowercase"},
		{"huge id", strings.Replace(good, `"ab":2`, `"ab":99999999999`, 1), "", "", `"ab" has id 99999999999`},
		{"negative id", strings.Replace(good, `"ab":2`, `"ab":-1`, 1), "", "", `"ab" has id -1`},
		{"shared id", strings.Replace(good, `"ab":2`, `"ab":1`, 1), "", "", "share id 1"},
		{"bad merge", strings.Replace(good, `["a b"]`, `[["a"]]`, 1), "", "", "model.merges[0]"},
		{"merge string", strings.Replace(good, `["a b"]`, `["ab"]`, 1), "", "", `merge 0 ("ab")`},
		{"unknown eos", good, "", `{"eos_token":"<none>"}`, `eos_token "<none>" is not a token`},
		{"bad add_bos", good, "", `{"add_bos_token":"yes"}`, "add_bos_token: want a bool"},
		{"bad config", good, `{"vocab_size":-5}`, "", "vocab_size -5"},
		{"huge config", good, `{"vocab_size":16000000}`, "", "too many unused ids"},
		{"padded", good, `{"vocab_size":60000}`, `{"eos_token":"<|end|>","add_bos_token":false}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range map[string]string{"tokenizer.json": c.tj, "config.json": c.cfg, "tokenizer_config.json": c.tc} {
				if body != "" {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			v, err := FromHF(dir)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if v.EOS != 3 || v.Types[3] != TypeControl || v.AddBOS || v.Tokens[2] != "ab" {
					t.Errorf("vocab %+v", v)
				}
				if n := len(v.Tokens); n > 4 && (n != 60000 || v.Tokens[n-1] != "[PAD59999]" || v.Types[n-1] != TypeUnused) {
					t.Errorf("padded vocab: %d tokens, last %q", n, v.Tokens[n-1])
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("error %v, want %q", err, c.err)
			}
		})
	}
	if _, err := FromHF(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("missing file: %v", err)
	}
}

// TestTransformersJS compares FromHF tokenizers with transformers.js
// (@lenml/tokenizers, a JavaScript port of Hugging Face tokenizers that
// applies the tokenizer.json normalizer) on the published tokenizers of
// QNNPREP_HF_TOKENIZERS. QNNPREP_TRANSFORMERSJS names the node_modules
// directory holding @lenml/tokenizers. Non-NFC texts are included: this is
// where HF (NFC for Qwen) and llama.cpp (no normalisation) differ.
func TestTransformersJS(t *testing.T) {
	nm := os.Getenv("QNNPREP_TRANSFORMERSJS")
	if nm == "" {
		t.Skip("QNNPREP_TRANSFORMERSJS not set")
	}
	eachHFDir(t, func(t *testing.T, name, dir string, _ *Vocab, tok *Tokenizer) {
		texts := peerTexts(t, name, []string{"<|im_start|>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<think>"})
		req, _ := json.Marshal(map[string]any{"node_modules": nm, "dir": dir, "texts": texts})
		cmd := exec.Command("node", "testdata/transformersjs_encode.mjs")
		cmd.Stdin = bytes.NewReader(req)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		var reply struct{ IDs [][]int32 }
		for _, l := range strings.Split(string(out), "\n") {
			if s, ok := strings.CutPrefix(l, "QNNPREP-RESULT "); ok {
				if err := json.Unmarshal([]byte(s), &reply); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(reply.IDs) != len(texts) {
			t.Fatalf("%d results for %d texts", len(reply.IDs), len(texts))
		}
		bad := 0
		for i, s := range texts {
			if got := tok.Encode(s, false); !slices.Equal(got, reply.IDs[i]) {
				if bad++; bad <= 5 {
					t.Errorf("%q:\n ours %v %q\n HF   %v %q", s, got, pieces(tok, got), reply.IDs[i], pieces(tok, reply.IDs[i]))
				}
			}
		}
		t.Logf("%d of %d texts differ", bad, len(texts))
	})
}
