package model

// Qwen3Next is Qwen3-Next: a hybrid of Gated DeltaNet layers and gated
// attention layers (dense MLP variants only; qnnprep has no MoE).
const Qwen3Next Arch = "qwen3next"

type qwen3Next struct{ baseArch }

func init() { register(qwen3Next{}) }

func (qwen3Next) Name() Arch { return Qwen3Next }

func (qwen3Next) Features() Features {
	return Features{
		HFModelTypes:         []string{"qwen3_next"},
		HFClasses:            []string{"Qwen3NextForCausalLM"},
		DefaultHeadDim:       256,
		DefaultContext:       32768,
		DefaultPartialRotary: 0.25,
		// Qwen3NextConfig's num_experts defaults to 512: a config.json
		// without it describes an MoE model.
		DefaultExperts:    512,
		QKNorm:            true,
		GatedAttention:    true,
		DeltaNet:          true,
		FusedDeltaNetHF:   true,
		ZeroCentredNorms:  true,
		PostAttentionNorm: true,
		MTP:               true,
	}
}

// writeHF states the dense MLP: without num_experts, transformers (and
// parseHFConfig) take every layer for MoE.
func (qwen3Next) writeHF(_ *Config, text map[string]any) (map[string]any, error) {
	text["num_experts"] = 0
	return text, nil
}

// fromGGUF presents llama.cpp's qwen3next ssm_ba (and the legacy ssm_in)
// as the split tensors every qwen3next model has here: ssm_beta/ssm_alpha
// (and attn_qkv/attn_gate).
func (qwen3Next) fromGGUF(cfg *Config, byName map[string]*Tensor, skip map[string]bool, problems []string) []string {
	for i, k := range cfg.LayerKinds {
		if k != DeltaNet {
			continue
		}
		if src := byName[blk(i, "ssm_ba.weight")]; src != nil && byName[blk(i, "ssm_beta.weight")] == nil &&
			byName[blk(i, "ssm_alpha.weight")] == nil {
			delete(byName, src.Name)
			hv := int64(cfg.SSMValueHeads)
			problems = splitRows(src, []int64{int64(cfg.Hidden), 2 * hv}, []split{
				{blk(i, "ssm_beta.weight"), hv, func() []int { b, _ := baRows(cfg); return b }},
				{blk(i, "ssm_alpha.weight"), hv, func() []int { _, a := baRows(cfg); return a }},
			}, byName, skip, problems)
		}
		if src := byName[blk(i, "ssm_in.weight")]; src != nil && byName[blk(i, "attn_qkv.weight")] == nil &&
			byName[blk(i, "attn_gate.weight")] == nil {
			delete(byName, src.Name)
			conv, value := int64(cfg.ConvDim()), int64(cfg.SSMValueHeads*cfg.SSMValueDim)
			problems = splitRows(src, []int64{int64(cfg.Hidden), conv + value}, []split{
				{blk(i, "attn_qkv.weight"), conv, func() []int { qkv, _ := qkvzRows(cfg); return qkv }},
				{blk(i, "attn_gate.weight"), value, func() []int { _, z := qkvzRows(cfg); return z }},
			}, byName, skip, problems)
		}
	}
	return problems
}
