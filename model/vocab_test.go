package model

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
)

func TestCheckVocab(t *testing.T) {
	cfg := Config{Arch: Llama, VocabSize: 512}
	md := func(kv ...any) gguf.Metadata {
		var m gguf.Metadata
		for i := 0; i < len(kv); i += 2 {
			m.Set(kv[i].(string), kv[i+1])
		}
		return m
	}
	for _, c := range []struct {
		name string
		md   gguf.Metadata
		want string // "" for no error
	}{
		{"no tokenizer keys", nil, ""},
		{"one token per row", md("tokenizer.ggml.tokens", make([]string, 512), "tokenizer.ggml.bos_token_id", uint32(1)), ""},
		{"none as 0xFFFFFFFF", md("tokenizer.ggml.eos_token_id", uint32(0xFFFFFFFF)), ""},
		{"none as -1", md("tokenizer.ggml.padding_token_id", int32(-1)), ""},
		{"last id", md("tokenizer.ggml.eos_token_id", uint32(511)), ""},
		{"more tokens than rows", md("tokenizer.ggml.tokens", make([]string, 50257)),
			"key tokenizer.ggml.tokens: a vocabulary of 50257 tokens (ids 0..50256) for an embedding of 512 rows (token_embd.weight, llama.vocab_size); want one token per row"},
		{"fewer tokens than rows", md("tokenizer.ggml.tokens", make([]string, 500)), "500 tokens"},
		{"tokens not strings", md("tokenizer.ggml.tokens", []int32{1}), "key tokenizer.ggml.tokens: want an array of strings"},
		{"bos past the end", md("tokenizer.ggml.bos_token_id", uint32(512)),
			"key tokenizer.ggml.bos_token_id = 512 is outside the vocabulary (ids 0..511)"},
		{"negative eot", md("tokenizer.ggml.eot_token_id", int32(-5)), "key tokenizer.ggml.eot_token_id = -5 is outside"},
		{"id of the wrong type", md("tokenizer.ggml.unknown_token_id", "0"), "key tokenizer.ggml.unknown_token_id: want an integer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := cfg.CheckVocab(c.md)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// Layer kinds read as names in JSON (inspect --json), and read back.
func TestLayerKindJSON(t *testing.T) {
	kinds := []LayerKind{DeltaNet, DeltaNet, Attention}
	b, err := json.Marshal(kinds)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `["deltanet","deltanet","attention"]` {
		t.Fatalf("got %s", b)
	}
	var back []LayerKind
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 3 || back[0] != DeltaNet || back[2] != Attention {
		t.Fatalf("read back %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`["mamba"]`), &back); err == nil || !strings.Contains(err.Error(), `unknown layer kind "mamba"`) {
		t.Fatalf("unknown kind: %v", err)
	}
	if _, err := json.Marshal([]LayerKind{7}); err == nil {
		t.Fatal("kind 7 marshalled")
	}
}
