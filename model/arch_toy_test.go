package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/safetensors"
)

// toy is a sixth architecture that exists only in this file: adding an
// architecture must need nothing else. It is a qwen3-like model (q/k
// norms, NEOX rope) with its own names, defaults, keys and rules, so each
// of them is seen to come from here: a transformers class and model_type,
// zero-centred norms, its own MLP tensor names, head_dim and context
// defaults, the rope base under "rope_base", and no grouped-query
// attention.
type toy struct{ baseArch }

const toyArch Arch = "toy"

func (toy) Name() Arch { return toyArch }

func (toy) Features() Features {
	return Features{
		HFModelTypes:   []string{"toy"},
		HFClasses:      []string{"ToyForCausalLM"},
		DefaultHeadDim: 8,
		DefaultContext: 1024,
		HFLayerNames: map[string]string{
			"mlp.w1.weight": "ffn_gate.weight",
			"mlp.w3.weight": "ffn_up.weight",
			"mlp.w2.weight": "ffn_down.weight",
		},
		QKNorm:           true,
		ZeroCentredNorms: true,
	}
}

func (toy) parseHF(j *hfJSON, c *Config) error {
	v, ok := j.get("rope_base")
	if !ok {
		return nil
	}
	f, ok := asFloat(v)
	if !ok {
		return fmt.Errorf("rope_base: want a number, got %s", show(v))
	}
	c.RopeTheta = float64(float32(f))
	return nil
}

func (toy) writeHF(c *Config, text map[string]any) (map[string]any, error) {
	delete(text, "rope_theta")
	text["rope_base"] = c.RopeTheta
	return text, nil
}

func (toy) validate(c *Config, bad func(format string, a ...any)) {
	if c.KVHeads != c.Heads {
		bad("toy has no grouped-query attention (kv_heads %d, heads %d)", c.KVHeads, c.Heads)
	}
}

func toyConfig() Config {
	return Config{
		Arch: toyArch, VocabSize: 16, Hidden: 16, Layers: 2, FFN: 24, Heads: 2, KVHeads: 2, HeadDim: 8,
		ContextLength: 64, RMSEps: 1e-6, RopeTheta: 500000, RopeDim: 8, RopeNeox: true, QKNorm: true,
		BOS: 1, EOS: 2, LayerKinds: make([]LayerKind, 2),
	}
}

// toyCheckpoint is a toy checkpoint with config.json from HFConfigJSON.
func toyCheckpoint(t *testing.T, cfg Config) *hfCkpt {
	t.Helper()
	js, err := HFConfigJSON(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	c := newCkpt(m)
	H, I, D := int64(cfg.Hidden), int64(cfg.FFN), int64(cfg.HeadDim)
	d := safetensors.F32
	c.add("model.embed_tokens.weight", d, int64(cfg.VocabSize), H)
	c.add("model.norm.weight", d, H)
	c.add("lm_head.weight", d, int64(cfg.VocabSize), H)
	for i := range cfg.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		c.add(p+"input_layernorm.weight", d, H)
		c.add(p+"post_attention_layernorm.weight", d, H)
		c.attention(p, H, int64(cfg.Heads), int64(cfg.KVHeads), D, d, false, false, true)
		c.add(p+"mlp.w1.weight", d, I, H)
		c.add(p+"mlp.w3.weight", d, I, H)
		c.add(p+"mlp.w2.weight", d, H, I)
	}
	return c
}

func TestSixthArchitecture(t *testing.T) {
	unregister := register(toy{})
	defer unregister()
	cfg := toyConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}

	t.Run("validation", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			edit func(*Config)
			want string
		}{
			{"own rule", func(c *Config) { c.KVHeads = 1 }, "toy has no grouped-query attention"},
			{"qk norm is a feature", func(c *Config) { c.QKNorm = false }, "qk_norm = false, want true for toy"},
			{"no deltanet", func(c *Config) { c.LayerKinds[1] = DeltaNet }, "layer 1 is a deltanet layer, but toy has none"},
			{"no gate", func(c *Config) { c.AttnOutputGate = true }, "attn_output_gate = true, want false for toy"},
		} {
			c := toyConfig()
			tc.edit(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
			}
		}
	})

	t.Run("config.json", func(t *testing.T) {
		js, err := HFConfigJSON(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"model_type": "toy"`, `"ToyForCausalLM"`, `"rope_base": 500000`} {
			if !bytes.Contains(js, []byte(want)) {
				t.Errorf("config.json lacks %s:\n%s", want, js)
			}
		}
		got, err := parseHFConfig(js)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, cfg) {
			t.Errorf("config.json round trip:\n got %+v\nwant %+v", got, cfg)
		}
		// The toy's defaults fill what config.json leaves out.
		var m map[string]any
		json.Unmarshal(js, &m)
		delete(m, "head_dim")
		delete(m, "max_position_embeddings")
		delete(m, "model_type") // the class then names the architecture
		js, _ = json.Marshal(m)
		got, err = parseHFConfig(js)
		if err != nil {
			t.Fatal(err)
		}
		if got.Arch != toyArch || got.HeadDim != 8 || got.ContextLength != 1024 {
			t.Errorf("defaults: arch %s, head_dim %d, context %d; want toy, 8, 1024", got.Arch, got.HeadDim, got.ContextLength)
		}
	})

	c := toyCheckpoint(t, cfg)
	m := mustOpen(t, c.write(t))
	defer m.Close()

	t.Run("tensor names", func(t *testing.T) {
		if !reflect.DeepEqual(m.Config, cfg) {
			t.Fatalf("config:\n got %+v\nwant %+v", m.Config, cfg)
		}
		var names []string
		for _, s := range ExpectedTensors(cfg) {
			names = append(names, s.Name)
		}
		var got []string
		for _, x := range m.Tensors {
			got = append(got, x.Name)
		}
		if !reflect.DeepEqual(got, names) {
			t.Fatalf("tensors %v, want %v", got, names)
		}
		for _, tc := range []struct {
			canonical, hf string
			add           float32 // zero-centred norms gain 1
		}{
			{"blk.1.ffn_gate.weight", "model.layers.1.mlp.w1.weight", 0},
			{"blk.0.ffn_down.weight", "model.layers.0.mlp.w2.weight", 0},
			{"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", 0}, // NEOX: not permuted
			{"blk.1.attn_norm.weight", "model.layers.1.input_layernorm.weight", 1},
			{"blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight", 1},
			{"blk.1.attn_k_norm.weight", "model.layers.1.self_attn.k_norm.weight", 1},
			{"output_norm.weight", "model.norm.weight", 1},
		} {
			v, err := m.Tensor(tc.canonical).Float32()
			if err != nil {
				t.Fatal(err)
			}
			src := c.get(tc.hf).vals
			for i := range v {
				if v[i] != src[i]+tc.add {
					t.Errorf("%s[%d] = %v, want %s + %v = %v", tc.canonical, i, v[i], tc.hf, tc.add, src[i]+tc.add)
					break
				}
			}
		}
	})

	t.Run("gguf", func(t *testing.T) {
		md := m.GGUFMetadata()
		if n, ok := md.Int("toy.block_count"); !ok || n != 2 {
			t.Errorf("toy.block_count = %d, %v; want 2", n, ok)
		}
		g := mustOpen(t, writeModelGGUF(t, md, cfg, m.Tensors))
		defer g.Close()
		if !reflect.DeepEqual(g.Config, cfg) {
			t.Errorf("config from GGUF:\n got %+v\nwant %+v", g.Config, cfg)
		}
		for _, x := range m.Tensors {
			a, err := x.Data()
			if err != nil {
				t.Fatal(err)
			}
			b, err := g.Tensor(x.Name).Data()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%s differs after the GGUF round trip", x.Name)
			}
		}
	})

	unregister()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `unsupported architecture "toy"`) {
		t.Errorf("after unregistering: Validate = %v", err)
	}
}

// RegisterToy registers the toy architecture for the external tests and
// returns a config of it.
func RegisterToy() (cfg Config, unregister func()) { return toyConfig(), register(toy{}) }
