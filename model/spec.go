package model

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Sanity bounds on hyper-parameters. They are far above any real model and
// keep tensor lists and shape products small before any file is trusted.
const (
	maxLayers  = 4096
	maxHeads   = 4096
	maxHeadDim = 1 << 16
	maxWidth   = 1 << 22 // hidden and ffn
	maxVocab   = 1 << 24
	maxKernel  = 64
	maxContext = 1 << 30
)

// Validate checks that the hyper-parameters are in range and consistent
// with each other and with the architecture.
func (c *Config) Validate() error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	rng := func(name string, v, lo, hi int) {
		switch {
		case v > hi:
			bad("%s = %d is too large (at most %d)", name, v, hi)
		case v < lo:
			bad("%s = %d, want %d..%d", name, v, lo, hi)
		}
	}
	arch, ok := Lookup(c.Arch)
	if !ok {
		return fmt.Errorf("unsupported architecture %q (supported: %s)", c.Arch, supportedList())
	}
	f := arch.Features()
	rng("vocab_size", c.VocabSize, 1, maxVocab)
	rng("hidden", c.Hidden, 1, maxWidth)
	rng("layers", c.Layers, 1, maxLayers)
	rng("ffn", c.FFN, 1, maxWidth)
	rng("heads", c.Heads, 1, maxHeads)
	rng("kv_heads", c.KVHeads, 1, maxHeads)
	rng("head_dim", c.HeadDim, 1, maxHeadDim)
	rng("context_length", c.ContextLength, 1, maxContext)
	if c.KVHeads > 0 && c.Heads%c.KVHeads != 0 {
		bad("heads %d not a multiple of kv_heads %d", c.Heads, c.KVHeads)
	}
	if c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
		bad("rope_dim = %d, want an even number in 2..head_dim (%d)", c.RopeDim, c.HeadDim)
	}
	if f.NormRope && c.HeadDim%2 != 0 {
		bad("head_dim = %d must be even for %s", c.HeadDim, c.Arch)
	}
	if !(c.RMSEps > 0) || math.IsInf(float64(c.RMSEps), 0) {
		bad("rms_eps = %v, want > 0", c.RMSEps)
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		bad("rope_theta = %v, want > 0", c.RopeTheta)
	}
	if n := len(c.RopeFreqFactors); n != 0 && n != c.RopeDim/2 {
		bad("%d rope_freq_factors, want rope_dim/2 = %d", n, c.RopeDim/2)
	}
	c.RopeScaling.validate(c, bad)
	if !f.MRoPE && len(c.MRopeSections) != 0 {
		bad("mrope_sections set for %s", c.Arch)
	}
	arch.validate(c, bad)
	for _, id := range []struct {
		name string
		v    int
	}{{"bos_token_id", c.BOS}, {"eos_token_id", c.EOS}} {
		if id.v < -1 || id.v >= c.VocabSize && c.VocabSize > 0 {
			bad("%s = %d is outside the vocabulary (want -1 or 0..%d)", id.name, id.v, c.VocabSize-1)
		}
	}
	if len(c.LayerKinds) != c.Layers {
		bad("%d layer kinds for %d layers", len(c.LayerKinds), c.Layers)
	}
	for i, k := range c.LayerKinds {
		if k != Attention && k != DeltaNet {
			bad("layer %d: unknown kind %d", i, k)
			break
		}
		if k == DeltaNet && !f.DeltaNet {
			bad("layer %d is a deltanet layer, but %s has none", i, c.Arch)
			break
		}
	}
	if f.DeltaNet {
		rng("conv_kernel", c.ConvKernel, 1, maxKernel)
		rng("ssm_key_heads", c.SSMKeyHeads, 1, maxHeads)
		rng("ssm_value_heads", c.SSMValueHeads, 1, maxHeads)
		rng("ssm_key_dim", c.SSMKeyDim, 1, maxHeadDim)
		rng("ssm_value_dim", c.SSMValueDim, 1, maxHeadDim)
		if c.SSMKeyHeads > 0 && c.SSMValueHeads%c.SSMKeyHeads != 0 {
			bad("ssm_value_heads %d not a multiple of ssm_key_heads %d", c.SSMValueHeads, c.SSMKeyHeads)
		}
		if c.SSMTiledHeads != f.TiledValueHeads {
			bad("ssm_tiled_heads = %v, want %v for %s", c.SSMTiledHeads, f.TiledValueHeads, c.Arch)
		}
	} else if c.ConvKernel != 0 || c.SSMKeyHeads != 0 || c.SSMValueHeads != 0 || c.SSMKeyDim != 0 ||
		c.SSMValueDim != 0 || c.SSMTiledHeads {
		bad("deltanet sizes set for %s", c.Arch)
	}
	if c.QKNorm != f.QKNorm {
		bad("qk_norm = %v, want %v for %s", c.QKNorm, f.QKNorm, c.Arch)
	}
	if c.AttnOutputGate != f.GatedAttention {
		bad("attn_output_gate = %v, want %v for %s", c.AttnOutputGate, f.GatedAttention, c.Arch)
	}
	if len(errs) > 0 {
		return errors.New("invalid config: " + strings.Join(errs, "; "))
	}
	return nil
}

// TensorSpec is one tensor a model of some Config must have.
type TensorSpec struct {
	Name string
	Dims []int64 // ggml ne order
	// Optional tensors may be absent. The only one is rope_freqs.weight:
	// its values are Config.RopeFreqFactors, so New rebuilds it from the
	// Config when the caller left it out.
	Optional bool
}

func blk(i int, s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }

// ExpectedTensors lists the canonical tensors of a model with this Config
// in canonical order: token_embd, rope_freqs, blk.0.* … blk.N.*,
// output_norm, output. Every tensor listed and not Optional is required;
// any other tensor is unexpected. It returns nil for an invalid Config.
//
// Which tensors exist follows the Config: output.weight only when
// !TiedEmbeddings, q/k/v biases only with QKVBias, q/k norms with QKNorm,
// rope_freqs.weight with RopeFreqFactors.
func ExpectedTensors(cfg Config) []TensorSpec {
	if cfg.Validate() != nil {
		return nil
	}
	H, V, I := int64(cfg.Hidden), int64(cfg.VocabSize), int64(cfg.FFN)
	D, nh, nkv := int64(cfg.HeadDim), int64(cfg.Heads), int64(cfg.KVHeads)
	var out []TensorSpec
	add := func(name string, dims ...int64) { out = append(out, TensorSpec{Name: name, Dims: dims}) }

	add("token_embd.weight", H, V)
	if len(cfg.RopeFreqFactors) > 0 {
		out = append(out, TensorSpec{Name: "rope_freqs.weight", Dims: []int64{int64(cfg.RopeDim / 2)}, Optional: true})
	}
	f := cfg.Arch.Features()
	for i, kind := range cfg.LayerKinds {
		add(blk(i, "attn_norm.weight"), H)
		if kind == DeltaNet {
			Hk, Hv := int64(cfg.SSMKeyHeads), int64(cfg.SSMValueHeads)
			Dk, Dv := int64(cfg.SSMKeyDim), int64(cfg.SSMValueDim)
			valueDim := Hv * Dv
			convDim := 2*Hk*Dk + valueDim
			add(blk(i, "attn_qkv.weight"), H, convDim)
			add(blk(i, "attn_gate.weight"), H, valueDim)
			add(blk(i, "ssm_beta.weight"), H, Hv)
			add(blk(i, "ssm_alpha.weight"), H, Hv)
			add(blk(i, "ssm_conv1d.weight"), int64(cfg.ConvKernel), convDim)
			add(blk(i, "ssm_dt.bias"), Hv)
			add(blk(i, "ssm_a"), Hv)
			add(blk(i, "ssm_norm.weight"), Dv)
			add(blk(i, "ssm_out.weight"), valueDim, H)
		} else {
			qRows := nh * D
			if cfg.AttnOutputGate {
				qRows *= 2
			}
			add(blk(i, "attn_q.weight"), H, qRows)
			if cfg.QKVBias {
				add(blk(i, "attn_q.bias"), qRows)
			}
			add(blk(i, "attn_k.weight"), H, nkv*D)
			if cfg.QKVBias {
				add(blk(i, "attn_k.bias"), nkv*D)
			}
			add(blk(i, "attn_v.weight"), H, nkv*D)
			if cfg.QKVBias {
				add(blk(i, "attn_v.bias"), nkv*D)
			}
			add(blk(i, "attn_output.weight"), nh*D, H)
			if cfg.QKNorm {
				add(blk(i, "attn_q_norm.weight"), D)
				add(blk(i, "attn_k_norm.weight"), D)
			}
		}
		if f.PostAttentionNorm {
			add(blk(i, "post_attention_norm.weight"), H)
		} else {
			add(blk(i, "ffn_norm.weight"), H)
		}
		add(blk(i, "ffn_gate.weight"), H, I)
		add(blk(i, "ffn_up.weight"), H, I)
		add(blk(i, "ffn_down.weight"), I, H)
	}
	add("output_norm.weight", H)
	if !cfg.TiedEmbeddings {
		add("output.weight", H, V)
	}
	return out
}
