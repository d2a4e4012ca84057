package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// hfJSON reads config.json values, looking in text_config first (the
// language model of a multimodal wrapper) and then at the top level.
type hfJSON struct {
	text, top map[string]any
	errs      []string
}

func (j *hfJSON) fail(format string, a ...any) { j.errs = append(j.errs, fmt.Sprintf(format, a...)) }

// get returns a non-null value for key; a JSON null counts as absent.
func (j *hfJSON) get(key string) (any, bool) {
	if v, ok := j.text[key]; ok && v != nil {
		return v, true
	}
	if v, ok := j.top[key]; ok && v != nil {
		return v, true
	}
	return nil, false
}

// object returns the JSON object under key, or nil.
func (j *hfJSON) object(key string) map[string]any {
	v, _ := j.get(key)
	o, _ := v.(map[string]any)
	return o
}

func asInt(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := n.Int64(); err == nil && i >= math.MinInt32 && i <= math.MaxInt32 {
		return int(i), true
	}
	// 64.0 is an integer too.
	if f, err := n.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) <= math.MaxInt32 {
		return int(f), true
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil && !math.IsInf(f, 0)
}

func (j *hfJSON) int(key string, def int, required bool) int {
	v, ok := j.get(key)
	if !ok {
		if required {
			j.fail("missing %s", key)
		}
		return def
	}
	n, ok := asInt(v)
	if !ok {
		j.fail("%s", badInt(key, v))
		return def
	}
	return n
}

// badInt says why v is not an int32: out of range, or not an integer.
func badInt(key string, v any) string {
	if n, ok := v.(json.Number); ok {
		if f, err := n.Float64(); err == nil && f == math.Trunc(f) {
			if f > 0 {
				return fmt.Sprintf("%s = %s is too large (at most %d)", key, n, math.MaxInt32)
			}
			return fmt.Sprintf("%s = %s is too small (at least %d)", key, n, math.MinInt32)
		}
	}
	return fmt.Sprintf("%s: want an integer, got %s", key, show(v))
}

func (j *hfJSON) float(key string, def float64) float64 {
	v, ok := j.get(key)
	return j.number(key, v, ok, def)
}

// number is v (key's value, present when ok) as a float64, or def when
// absent; a value that is not a number is an error.
func (j *hfJSON) number(key string, v any, ok bool, def float64) float64 {
	if !ok {
		return def
	}
	f, ok := asFloat(v)
	if !ok {
		j.fail("%s: want a number, got %s", key, show(v))
		return def
	}
	return f
}

func (j *hfJSON) bool(key string, def bool) bool {
	v, ok := j.get(key)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		j.fail("%s: want true or false, got %s", key, show(v))
		return def
	}
	return b
}

// tokenID reads bos/eos_token_id: an integer, or a list whose first entry
// is taken; absent or null is -1.
func (j *hfJSON) tokenID(key string) int {
	v, ok := j.get(key)
	if !ok {
		return -1
	}
	if l, ok := v.([]any); ok {
		if len(l) == 0 {
			return -1
		}
		v = l[0]
	}
	n, ok := asInt(v)
	if _, num := v.(json.Number); !ok && num {
		j.fail("%s", badInt(key, v))
		return -1
	}
	if !ok || n < 0 {
		j.fail("%s: want a token id or a list of them, got %s", key, show(v))
		return -1
	}
	return n
}

// rope returns a rope parameter: top level (or text_config) first, then
// inside rope_parameters (transformers v5), then rope_scaling.
func (j *hfJSON) rope(key string) (any, bool) {
	if v, ok := j.get(key); ok {
		return v, true
	}
	for _, obj := range []string{"rope_parameters", "rope_scaling"} {
		if v, ok := j.object(obj)[key]; ok && v != nil {
			return v, true
		}
	}
	return nil, false
}

func (j *hfJSON) ropeFloat(key string, def float64) float64 {
	v, ok := j.rope(key)
	return j.number(key, v, ok, def)
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 40 {
		return fmt.Sprintf("a %T", v)
	}
	return string(b)
}

// parseHFConfig turns a config.json into a Config.
func parseHFConfig(data []byte) (Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Config{}, fmt.Errorf("bad JSON: %w", err)
	}
	top, ok := v.(map[string]any)
	if !ok {
		return Config{}, errors.New("bad JSON: want an object")
	}
	j := &hfJSON{text: top, top: top}
	if tc, ok := top["text_config"].(map[string]any); ok {
		j.text = tc
	}

	modelType, _ := top["model_type"].(string)
	textType, _ := j.text["model_type"].(string)
	class := ""
	if l, ok := top["architectures"].([]any); ok && len(l) > 0 {
		class, _ = l[0].(string)
	}
	for _, s := range []string{modelType, textType, class} {
		if ls := strings.ToLower(s); strings.Contains(ls, "moe") || strings.Contains(ls, "mixtral") {
			return Config{}, fmt.Errorf("unsupported: mixture-of-experts (%s)", s)
		}
	}
	a, ok := hfByType(modelType)
	if !ok {
		a, ok = hfByType(textType)
	}
	if !ok && modelType == "" {
		a, ok = hfByClass(class)
	}
	if !ok {
		name := modelType
		if name == "" {
			name = class
		}
		if name == "" {
			return Config{}, fmt.Errorf("no model_type or architectures (supported: %s)", hfSupportedList())
		}
		return Config{}, fmt.Errorf("unsupported architecture %s (supported: %s)", name, hfSupportedList())
	}
	f := a.Features()

	c := Config{Arch: a.Name()}
	c.VocabSize = j.int("vocab_size", 0, true)
	c.Hidden = j.int("hidden_size", 0, true)
	c.Layers = j.int("num_hidden_layers", 0, true)
	c.FFN = j.int("intermediate_size", 0, true)
	c.Heads = j.int("num_attention_heads", 0, true)
	c.KVHeads = j.int("num_key_value_heads", c.Heads, false)
	// head_dim defaults as in each transformers config class.
	defHead := f.DefaultHeadDim
	if defHead == 0 && c.Heads > 0 {
		defHead = c.Hidden / c.Heads
	}
	c.HeadDim = j.int("head_dim", defHead, false)
	c.ContextLength = j.int("max_position_embeddings", f.DefaultContext, false)
	c.RMSEps = float32(j.float("rms_norm_eps", 1e-6))
	// GGUF stores the rope base as float32; round here so both sources
	// give the same Config.
	c.RopeTheta = float64(float32(j.ropeFloat("rope_theta", 10000)))
	defPartial := f.DefaultPartialRotary
	if defPartial == 0 {
		defPartial = 1
	}
	partial := j.ropeFloat("partial_rotary_factor", defPartial)
	c.RopeDim = int(float64(c.HeadDim) * partial)
	c.RopeNeox = !f.NormRope
	c.TiedEmbeddings = j.bool("tie_word_embeddings", false)
	c.BOS = j.tokenID("bos_token_id")
	c.EOS = j.tokenID("eos_token_id")
	c.QKVBias = f.QKVBias || j.bool("attention_bias", false)
	c.QKNorm = f.QKNorm
	c.AttnOutputGate = f.GatedAttention

	if n := j.int("num_local_experts", 0, false); n > 0 {
		return Config{}, fmt.Errorf("unsupported: mixture-of-experts (num_local_experts = %d)", n)
	}
	if err := hfExperts(j, f.DefaultExperts, c.Layers); err != nil {
		return Config{}, err
	}
	if len(j.errs) > 0 {
		return Config{}, errors.New(strings.Join(j.errs, "; "))
	}
	if c.Layers < 1 || c.Layers > maxLayers {
		return Config{}, fmt.Errorf("num_hidden_layers = %d, want 1..%d", c.Layers, maxLayers)
	}

	if err := hfRopeScaling(j, &c); err != nil {
		return Config{}, err
	}
	c.LayerKinds = make([]LayerKind, c.Layers)
	if j.bool("use_sliding_window", false) {
		return Config{}, errors.New("unsupported: sliding-window attention (use_sliding_window)")
	}
	if v, ok := j.get("layer_types"); ok {
		list, _ := v.([]any)
		if len(list) != c.Layers {
			return Config{}, fmt.Errorf("layer_types: want %d entries, got %s", c.Layers, show(v))
		}
		for i, e := range list {
			switch s, _ := e.(string); {
			case s == "full_attention":
			case s == "linear_attention" && f.DeltaNet:
				c.LayerKinds[i] = DeltaNet
			case s == "sliding_attention":
				return Config{}, fmt.Errorf("unsupported: sliding-window attention (layer_types[%d])", i)
			default:
				return Config{}, fmt.Errorf("layer_types[%d]: unsupported layer type %s for %s", i, show(e), c.Arch)
			}
		}
	} else if f.DeltaNet {
		n := j.int("full_attention_interval", 4, false)
		if n < 1 {
			return Config{}, fmt.Errorf("full_attention_interval = %d, want ≥ 1", n)
		}
		for i := range c.LayerKinds {
			if (i+1)%n != 0 {
				c.LayerKinds[i] = DeltaNet
			}
		}
	}
	if f.DeltaNet {
		c.ConvKernel = j.int("linear_conv_kernel_dim", 4, false)
		c.SSMKeyDim = j.int("linear_key_head_dim", 128, false)
		c.SSMValueDim = j.int("linear_value_head_dim", 128, false)
		c.SSMKeyHeads = j.int("linear_num_key_heads", 16, false)
		c.SSMValueHeads = j.int("linear_num_value_heads", 32, false)
		c.SSMTiledHeads = f.TiledValueHeads
	}
	if err := a.parseHF(j, &c); err != nil {
		return Config{}, err
	}
	if len(j.errs) > 0 {
		return Config{}, errors.New(strings.Join(j.errs, "; "))
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// hfExperts rejects a mixture-of-experts config: with num_experts (default
// def) set, a layer has experts unless it is in mlp_only_layers or
// decoder_sparse_step skips it, as in transformers' Qwen MoE classes.
func hfExperts(j *hfJSON, def, layers int) error {
	experts := j.int("num_experts", def, false)
	if experts <= 0 {
		return nil
	}
	step := j.int("decoder_sparse_step", 1, false)
	only := map[int]bool{}
	if l, ok := j.get("mlp_only_layers"); ok {
		list, _ := l.([]any)
		for _, v := range list {
			if n, ok := asInt(v); ok {
				only[n] = true
			}
		}
	}
	for i := 0; i < layers && i < maxLayers; i++ {
		if !only[i] && step > 0 && (i+1)%step == 0 {
			return fmt.Errorf("unsupported: mixture-of-experts (num_experts = %d, layer %d)", experts, i)
		}
	}
	return nil
}

// hfRopeScaling reads rope_parameters (transformers v5) or rope_scaling,
// as llama.cpp's converter does: linear and yarn keep their parameters
// (written as rope.scaling.* keys), llama3 becomes per-frequency factors
// (written as rope_freqs.weight). Other types are refused rather than
// decoded unscaled.
func hfRopeScaling(j *hfJSON, c *Config) error {
	obj := j.object("rope_parameters")
	if obj == nil {
		obj = j.object("rope_scaling")
	}
	if fa, ok := obj["full_attention"].(map[string]any); ok {
		obj = fa
	}
	if obj == nil {
		return nil
	}
	typ, _ := obj["rope_type"].(string)
	if typ == "" {
		typ, _ = obj["type"].(string)
	}
	num := func(key string) (float64, bool) {
		v, ok := obj[key]
		if !ok || v == nil {
			return 0, false
		}
		f, ok := asFloat(v)
		if !ok {
			j.fail("rope_scaling.%s: want a number, got %s", key, show(v))
		}
		return f, ok
	}
	numOr := func(key string, def float64) float64 {
		if f, ok := num(key); ok {
			return f
		}
		return def
	}
	var s RopeScaling
	switch typ {
	case "", "default":
		return nil
	case "linear":
		s.Type = RopeLinear
	case "yarn":
		s.Type = RopeYarn
	case "llama3":
		s.Type = RopeLlama3
	default:
		return fmt.Errorf("unsupported rope scaling type %q (supported: linear, yarn, llama3)", typ)
	}
	factor, ok := num("factor")
	if !ok && s.Type != RopeLlama3 {
		return fmt.Errorf("rope_scaling: %s scaling without a factor", typ)
	}
	switch s.Type {
	case RopeLinear:
		s.Factor = float32(factor)
	case RopeYarn:
		s.Factor = float32(factor)
		// The converter requires original_max_position_embeddings (it
		// mirrors a top-level one); transformers falls back to
		// max_position_embeddings, as llama.cpp does without the key.
		if v, ok := num("original_max_position_embeddings"); ok {
			s.OrigContext = int(v)
		} else if v, ok := j.get("original_max_position_embeddings"); ok {
			n, _ := asInt(v)
			s.OrigContext = n
		} else {
			s.OrigContext = c.ContextLength
		}
		opt := func(keys ...string) *float32 {
			for _, k := range keys {
				if f, ok := num(k); ok {
					v := float32(f)
					return &v
				}
			}
			return nil
		}
		s.YarnExtFactor = opt("extrapolation_factor")
		s.YarnAttnFactor = opt("attention_factor", "attn_factor")
		s.YarnBetaFast = opt("beta_fast")
		s.YarnBetaSlow = opt("beta_slow")
		for _, k := range []string{"mscale", "mscale_all_dim"} {
			if v, ok := obj[k]; ok && v != nil {
				return fmt.Errorf("rope_scaling.%s: unsupported (DeepSeek's YaRN variant; llama.cpp applies it only to DeepSeek)", k)
			}
		}
		if v, ok := obj["truncate"].(bool); ok && !v {
			return errors.New("rope_scaling.truncate = false: unsupported (llama.cpp always rounds the YaRN correction band to whole pairs)")
		}
	case RopeLlama3:
		if !c.Arch.Features().RopeFreqs {
			return fmt.Errorf("rope scaling llama3 on %s: llama.cpp's converter writes rope_freqs.weight only for llama, and its %s ignores it", c.Arch, c.Arch)
		}
		s.Factor = float32(numOr("factor", 8))
		s.LowFreqFactor = float32(numOr("low_freq_factor", 1))
		s.HighFreqFactor = float32(numOr("high_freq_factor", 4))
		s.OrigContext = int(numOr("original_max_position_embeddings", 8192))
		if len(j.errs) > 0 {
			return errors.New(strings.Join(j.errs, "; "))
		}
		if !(s.Factor > 0) || !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || !(s.OrigContext > 0) {
			return fmt.Errorf("rope_scaling: bad llama3 parameters (factor %v, low_freq_factor %v, high_freq_factor %v, original_max_position_embeddings %v)",
				s.Factor, s.LowFreqFactor, s.HighFreqFactor, s.OrigContext)
		}
		if c.RopeDim > 0 && c.RopeDim <= maxHeadDim && c.RopeDim%2 == 0 { // else Validate reports the rope dims
			c.RopeFreqFactors = Llama3FreqFactors(c.RopeTheta, c.RopeDim, s)
		}
	}
	if len(j.errs) > 0 {
		return errors.New(strings.Join(j.errs, "; "))
	}
	c.RopeScaling = s
	return nil
}
