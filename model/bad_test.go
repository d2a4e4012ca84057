package model

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/safetensors"
)

func TestBadInputs(t *testing.T) {
	type tc struct {
		name string
		make func(t *testing.T) string // returns the path to open
		want []string                  // substrings of the error
	}
	hf := func(base func() *hfCkpt, edit func(c *hfCkpt)) func(t *testing.T) string {
		return func(t *testing.T) string {
			c := base()
			edit(c)
			return c.write(t)
		}
	}
	rawConfig := func(js string) func(t *testing.T) string {
		return func(t *testing.T) string {
			dir := tinyQwen3().write(t)
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(js), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}
	}
	// gg writes the tiny qwen3 as GGUF after edit changes its metadata
	// and tensors.
	gg := func(edit func(md *gguf.Metadata, ts *[]*Tensor)) func(t *testing.T) string {
		return func(t *testing.T) string {
			m := mustOpen(t, tinyQwen3().write(t))
			md, ts := m.GGUFMetadata(), slices.Clone(m.Tensors)
			edit(&md, &ts)
			return writeModelGGUF(t, md, m.Config, ts)
		}
	}
	drop := func(ts *[]*Tensor, name string) {
		*ts = slices.DeleteFunc(*ts, func(x *Tensor) bool { return x.Name == name })
	}
	cases := []tc{
		{"unsupported architecture", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["model_type"] = "mistral"
			c.config["architectures"] = []string{"MistralForCausalLM"}
		}), []string{"config.json", "unsupported architecture mistral", "supported: llama, qwen2, qwen3, qwen3_5, qwen3_next"}},
		{"no model type", hf(tinyQwen3, func(c *hfCkpt) {
			delete(c.config, "model_type")
			delete(c.config, "architectures")
		}), []string{"config.json", "no model_type"}},
		{"missing tensor", hf(tinyQwen3, func(c *hfCkpt) {
			c.remove("model.layers.1.mlp.down_proj.weight")
		}), []string{"1 problem: missing blk.1.ffn_down.weight"}},
		{"extra tensor", hf(tinyQwen3, func(c *hfCkpt) {
			c.add("model.layers.0.mlp.extra.weight", safetensors.BF16, 4)
		}), []string{"unexpected tensor model.layers.0.mlp.extra.weight"}},
		{"layer past the end", hf(tinyQwen3, func(c *hfCkpt) {
			c.add("model.layers.2.input_layernorm.weight", safetensors.BF16, 16)
		}), []string{"unexpected tensor model.layers.2.input_layernorm.weight"}},
		{"wrong shape", hf(tinyQwen3, func(c *hfCkpt) {
			c.get("model.layers.0.self_attn.q_proj.weight").shape = []int64{64, 8}
		}), []string{"blk.0.attn_q.weight (model.layers.0.self_attn.q_proj.weight) has shape [8 64], expected [16 32]"}},
		{"several problems", hf(tinyQwen3, func(c *hfCkpt) {
			c.remove("model.layers.1.mlp.down_proj.weight")
			c.get("model.layers.0.self_attn.k_proj.weight").shape = []int64{32, 8}
			c.add("lm_head.bias", safetensors.BF16, 32)
		}), []string{"3 problems", "missing blk.1.ffn_down.weight", "blk.0.attn_k.weight (model.layers.0.self_attn.k_proj.weight) has shape [8 32], expected [16 16]", "unexpected tensor lm_head.bias"}},
		{"untied without lm_head", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["tie_word_embeddings"] = false
		}), []string{"missing output.weight"}},
		{"unsupported dtype", hf(tinyQwen3, func(c *hfCkpt) {
			c.get("model.layers.0.mlp.up_proj.weight").dtype = safetensors.I8
		}), []string{"1 problem: blk.0.ffn_up.weight (model.layers.0.mlp.up_proj.weight): dtype I8 not supported"}},
		{"split source misshapen", hf(tinyQwen3Next, func(c *hfCkpt) {
			c.get("model.layers.0.linear_attn.in_proj_ba.weight").shape = []int64{nxH, 2 * nxHv}
		}), []string{"1 problem: model.layers.0.linear_attn.in_proj_ba.weight has shape [8 16], expected [16 8]"}},
		{"linear_attn on an attention layer", hf(tinyQwen3Next, func(c *hfCkpt) {
			c.add("model.layers.1.linear_attn.A_log", safetensors.F32, nxHv)
		}), []string{"unexpected tensor model.layers.1.linear_attn.A_log"}},
		{"moe model type", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["model_type"] = "qwen3_moe"
			c.config["architectures"] = []string{"Qwen3MoeForCausalLM"}
		}), []string{"config.json", "unsupported: mixture-of-experts"}},
		{"moe qwen3_next experts by default", hf(tinyQwen3Next, func(c *hfCkpt) {
			delete(c.config, "num_experts")
		}), []string{"unsupported: mixture-of-experts (num_experts = 512"}},
		{"moe num_experts", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["num_experts"] = 8
		}), []string{"unsupported: mixture-of-experts"}},
		{"moe qwen3_5", hf(tinyQwen35, func(c *hfCkpt) {
			c.config["model_type"] = "qwen3_5_moe"
		}), []string{"unsupported: mixture-of-experts (qwen3_5_moe)"}},
		{"bad json", rawConfig(`{"model_type": "qwen3",`), []string{"config.json", "bad JSON"}},
		{"json not an object", rawConfig(`[1, 2]`), []string{"config.json", "bad JSON"}},
		{"hidden_size not a number", rawConfig(`{"model_type": "qwen3", "hidden_size": "big", "vocab_size": 32,
			"num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 24}`),
			[]string{"config.json", `hidden_size: want an integer, got "big"`}},
		{"hidden_size missing", rawConfig(`{"model_type": "qwen3", "vocab_size": 32,
			"num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 24}`),
			[]string{"config.json", "missing hidden_size"}},
		{"heads do not divide", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["num_key_value_heads"] = 3
		}), []string{"config.json", "heads 4 not a multiple of kv_heads 3"}},
		{"absurd layer count", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["num_hidden_layers"] = 1 << 30
		}), []string{"config.json", "num_hidden_layers = 1073741824"}},
		{"layer_types length", hf(tinyQwen35, func(c *hfCkpt) {
			c.config["text_config"].(map[string]any)["layer_types"] = []string{"full_attention"}
		}), []string{"config.json", "layer_types: want 3 entries"}},
		{"rope scaling", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["rope_scaling"] = map[string]any{"type": "dynamic", "factor": 4}
		}), []string{"config.json", `unsupported rope scaling type "dynamic"`}},
		{"rope scaling llama3 on qwen3", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8}
		}), []string{"config.json", "rope scaling llama3 on qwen3"}},
		{"yarn beta llama.cpp ignores", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4, "beta_fast": 16}
		}), []string{"config.json", "yarn_beta_fast = 16"}},
		{"sliding window", hf(tinyQwen2, func(c *hfCkpt) {
			c.config["use_sliding_window"] = true
		}), []string{"config.json", "sliding-window"}},
		{"no config.json", func(t *testing.T) string {
			dir := tinyQwen3().write(t)
			os.Remove(filepath.Join(dir, "config.json"))
			return dir
		}, []string{"not a GGUF file or a Hugging Face model directory"}},
		{"not a gguf", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "x.gguf")
			os.WriteFile(p, []byte("this is not a model at all"), 0o644)
			return p
		}, []string{"x.gguf"}},
		{"gguf unsupported architecture", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			md.Set("general.architecture", "gpt2")
		}), []string{"m.gguf", "unsupported architecture gpt2 (supported: llama, qwen2, qwen3, qwen35, qwen3next)"}},
		{"gguf moe architecture", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			md.Set("general.architecture", "qwen35moe")
		}), []string{"m.gguf", "unsupported: mixture-of-experts"}},
		{"gguf expert_count", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			md.Set("qwen3.expert_count", uint32(8))
		}), []string{"m.gguf", "unsupported: mixture-of-experts (qwen3.expert_count = 8)"}},
		{"gguf missing key", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			md.Delete("qwen3.embedding_length")
		}), []string{"m.gguf", "missing key qwen3.embedding_length"}},
		{"gguf key of the wrong type", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			md.Set("qwen3.block_count", "two")
		}), []string{"m.gguf", "key qwen3.block_count: want an integer, got string"}},
		{"gguf missing and extra tensors", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			drop(ts, "blk.1.attn_k_norm.weight")
			*ts = append(*ts, NewTensor("blk.0.ffn_gate_exps.weight", []int64{4}, gguf.F32, make([]byte, 16)))
		}), []string{"m.gguf: 2 problems: missing blk.1.attn_k_norm.weight; unexpected tensor blk.0.ffn_gate_exps.weight"}},
		{"gguf rope_freqs of the wrong length", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			*ts = append(*ts, NewTensor("rope_freqs.weight", []int64{3}, gguf.F32, make([]byte, 12)))
		}), []string{"m.gguf: 1 problem: rope_freqs.weight has shape [3], expected [4]"}},
		{"hf integer too large", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["max_position_embeddings"] = int64(1000000000000)
		}), []string{"config.json", "max_position_embeddings = 1000000000000 is too large (at most 2147483647)"}},
		{"hf context above the limit", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["max_position_embeddings"] = int64(1<<31 - 1)
		}), []string{"config.json", "context_length = 2147483647 is too large (at most 1073741824)"}},
		{"hf eos outside the vocabulary", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["eos_token_id"] = 32
		}), []string{"config.json", "eos_token_id = 32 is outside the vocabulary (want -1 or 0..31)"}},
		{"hf bos too large", hf(tinyQwen3, func(c *hfCkpt) {
			c.config["bos_token_id"] = int64(1) << 40
		}), []string{"config.json", "bos_token_id = 1099511627776 is too large"}},
		{"gguf key too large", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			md.Set("qwen3.context_length", uint64(1000000000000))
		}), []string{"m.gguf", "key qwen3.context_length = 1000000000000 is too large (at most 2147483647)"}},
		{"gguf bos outside the vocabulary", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			md.Set("tokenizer.ggml.bos_token_id", uint32(600))
		}), []string{"m.gguf", "key tokenizer.ggml.bos_token_id = 600 is outside the vocabulary (ids 0..31)"}},
		{"gguf padding id outside the vocabulary", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			md.Set("tokenizer.ggml.padding_token_id", uint32(32))
		}), []string{"m.gguf", "key tokenizer.ggml.padding_token_id = 32 is outside the vocabulary (ids 0..31)"}},
		{"gguf token count differs from the embedding rows", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			md.Set("tokenizer.ggml.tokens", make([]string, 40))
		}), []string{"m.gguf", "key tokenizer.ggml.tokens: a vocabulary of 40 tokens (ids 0..39) for an embedding of 32 rows"}},
		{"gguf wrong shape", gg(func(md *gguf.Metadata, ts *[]*Tensor) {
			for i, x := range *ts {
				if x.Name == "blk.0.ffn_down.weight" {
					(*ts)[i] = NewTensor(x.Name, []int64{16, 24}, x.Type, make([]byte, x.Bytes()))
				}
			}
		}), []string{"m.gguf: 1 problem: blk.0.ffn_down.weight has shape [16 24], expected [24 16]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.make(t)
			m, err := Open(path)
			if err == nil {
				m.Close()
				t.Fatal("no error")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

// New checks like Open does.
func TestNewRejects(t *testing.T) {
	m := mustOpen(t, tinyQwen3().write(t))
	ts := slices.DeleteFunc(slices.Clone(m.Tensors), func(x *Tensor) bool { return x.Name == "blk.0.attn_q.weight" })
	ts = append(ts, m.Tensors[1], NewTensor("output.weight", []int64{16, 32}, gguf.F32, make([]byte, 16*32*4)))
	_, err := New(m.Config, ts)
	for _, w := range []string{"3 problems", "duplicate tensor " + m.Tensors[1].Name, "missing blk.0.attn_q.weight", "unexpected tensor output.weight"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	cfg := m.Config
	cfg.Heads = 3
	if _, err := New(cfg, m.Tensors); err == nil || !strings.Contains(err.Error(), "heads 3 not a multiple of kv_heads 2") {
		t.Errorf("bad config: %v", err)
	}
	// A quantized type whose blocks do not fit the row length.
	q := slices.Clone(m.Tensors)
	for i, x := range q {
		if x.Name == "blk.0.ffn_down.weight" { // rows of 24
			q[i] = NewTensor(x.Name, x.Dims, gguf.Q4_0, nil)
		}
	}
	if _, err := New(m.Config, q); err == nil || !strings.Contains(err.Error(), "blk.0.ffn_down.weight") {
		t.Errorf("Q4_0 rows of 24: %v", err)
	}
}
