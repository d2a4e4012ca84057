package model

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// HFConfigJSON returns a config.json for c in the keys transformers and
// Open read, so a checkpoint with it opens as c. It fails for what
// config.json cannot say: rope frequency factors, a rope_dim that is no
// float fraction of head_dim, and a rope order or q/k/v biases other than
// the architecture's. Keys are sorted, so the bytes depend only on c.
func HFConfigJSON(c Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	a, _ := Lookup(c.Arch)
	f := a.Features()
	if len(f.HFModelTypes) == 0 || len(f.HFClasses) == 0 {
		return nil, fmt.Errorf("%s has no Hugging Face names", c.Arch)
	}
	rs, err := hfRopeScalingJSON(&c)
	if err != nil {
		return nil, err
	}
	partial := float64(c.RopeDim) / float64(c.HeadDim)
	if int(float64(c.HeadDim)*partial) != c.RopeDim {
		return nil, fmt.Errorf("rope_dim %d is not head_dim %d × a float partial_rotary_factor", c.RopeDim, c.HeadDim)
	}
	if c.RopeNeox != !f.NormRope {
		return nil, fmt.Errorf("rope_neox = %v cannot be expressed for %s", c.RopeNeox, c.Arch)
	}
	if c.QKVBias != f.QKVBias {
		return nil, fmt.Errorf("qkv_bias = %v cannot be expressed for %s", c.QKVBias, c.Arch)
	}
	text := map[string]any{
		"model_type":              f.HFModelTypes[0],
		"vocab_size":              c.VocabSize,
		"hidden_size":             c.Hidden,
		"intermediate_size":       c.FFN,
		"num_hidden_layers":       c.Layers,
		"num_attention_heads":     c.Heads,
		"num_key_value_heads":     c.KVHeads,
		"head_dim":                c.HeadDim,
		"max_position_embeddings": c.ContextLength,
		"rms_norm_eps":            float64(c.RMSEps),
		"rope_theta":              c.RopeTheta,
		"hidden_act":              "silu",
		"tie_word_embeddings":     c.TiedEmbeddings,
		"torch_dtype":             "float32",
	}
	if rs != nil {
		text["rope_scaling"] = rs
	}
	if c.BOS >= 0 {
		text["bos_token_id"] = c.BOS
	}
	if c.EOS >= 0 {
		text["eos_token_id"] = c.EOS
	}
	if f.DeltaNet {
		types := make([]string, c.Layers)
		for i, k := range c.LayerKinds {
			types[i] = "full_attention"
			if k == DeltaNet {
				types[i] = "linear_attention"
			}
		}
		text["layer_types"] = types
		text["linear_conv_kernel_dim"] = c.ConvKernel
		text["linear_key_head_dim"] = c.SSMKeyDim
		text["linear_value_head_dim"] = c.SSMValueDim
		text["linear_num_key_heads"] = c.SSMKeyHeads
		text["linear_num_value_heads"] = c.SSMValueHeads
		text["attention_bias"] = false
		text["partial_rotary_factor"] = partial
	}
	top, err := a.writeHF(&c, text)
	if err != nil {
		return nil, err
	}
	top["architectures"] = []string{f.HFClasses[0]}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(top); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// hfRopeScalingJSON is c's rope_scaling object in transformers' keys, or
// nil without scaling. Llama 3 factors need the parameters that give them.
func hfRopeScalingJSON(c *Config) (map[string]any, error) {
	s := c.RopeScaling
	num := func(f float32) float64 { return float64(f) }
	switch s.Type {
	case RopeNoScaling:
		return nil, nil
	case RopeLinear:
		return map[string]any{"rope_type": "linear", "factor": num(s.Factor)}, nil
	case RopeYarn:
		m := map[string]any{"rope_type": "yarn", "factor": num(s.Factor)}
		if s.OrigContext > 0 {
			m["original_max_position_embeddings"] = s.OrigContext
		}
		for _, kv := range []struct {
			key string
			v   *float32
		}{
			{"extrapolation_factor", s.YarnExtFactor},
			{"attention_factor", s.YarnAttnFactor},
			{"beta_fast", s.YarnBetaFast},
			{"beta_slow", s.YarnBetaSlow},
		} {
			if kv.v != nil {
				m[kv.key] = num(*kv.v)
			}
		}
		if s.AttnFactor != 0 && s.AttnFactor != 1 {
			return nil, fmt.Errorf("rope.scaling.attn_factor %v cannot be written as config.json", s.AttnFactor)
		}
		return m, nil
	case RopeLlama3:
		if s.LowFreqFactor == 0 || s.OrigContext == 0 {
			return nil, fmt.Errorf("llama3 rope frequency factors without their parameters cannot be written as config.json")
		}
		want := Llama3FreqFactors(c.RopeTheta, c.RopeDim, s)
		for i := range want {
			if !closeToRel(want[i], c.RopeFreqFactors[i], 1e-5) {
				return nil, fmt.Errorf("rope frequency factor %d = %v is not what the llama3 parameters give (%v)", i, c.RopeFreqFactors[i], want[i])
			}
		}
		return map[string]any{"rope_type": "llama3", "factor": num(s.Factor), "low_freq_factor": num(s.LowFreqFactor),
			"high_freq_factor": num(s.HighFreqFactor), "original_max_position_embeddings": s.OrigContext}, nil
	}
	return nil, fmt.Errorf("unknown rope scaling type %q", s.Type)
}
