package synth

import "github.com/qnnprep/qnnprep/model"

// RopeScalings are the RoPE scalings an architecture's synthetic configs
// can carry: linear and yarn for all, llama3 where llama.cpp applies
// rope_freqs.weight (llama). Each extends an original context of 64, a
// quarter of Config's ContextLength, so positions in a prompt of a few
// dozen tokens already rotate differently from plain RoPE.
func RopeScalings(arch model.Arch) []model.RopeScaling {
	out := []model.RopeScaling{
		{Type: model.RopeLinear, Factor: 4},
		{Type: model.RopeYarn, Factor: 4, OrigContext: 64},
	}
	if arch.Features().RopeFreqs {
		out = append(out, model.RopeScaling{Type: model.RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 64})
	}
	return out
}

// RopeScaled returns cfg with RoPE scaling s; for llama3 it adds the
// rope_freqs factors llama.cpp's converter computes from s.
func RopeScaled(cfg model.Config, s model.RopeScaling) model.Config {
	cfg.RopeScaling = s
	cfg.RopeFreqFactors = nil
	if s.Type == model.RopeLlama3 {
		cfg.RopeFreqFactors = model.Llama3FreqFactors(cfg.RopeTheta, cfg.RopeDim, s)
	}
	return cfg
}
