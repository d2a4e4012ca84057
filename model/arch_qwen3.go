package model

// Qwen3 is the dense Qwen3: q/k RMS norms, no biases.
const Qwen3 Arch = "qwen3"

type qwen3 struct{ baseArch }

func init() { register(qwen3{}) }

func (qwen3) Name() Arch { return Qwen3 }

func (qwen3) Features() Features {
	return Features{
		HFModelTypes:   []string{"qwen3"},
		HFClasses:      []string{"Qwen3ForCausalLM"},
		DefaultHeadDim: 128,
		DefaultContext: 32768,
		QKNorm:         true,
	}
}

func (qwen3) writeHF(_ *Config, text map[string]any) (map[string]any, error) {
	text["attention_bias"] = false
	return text, nil
}
