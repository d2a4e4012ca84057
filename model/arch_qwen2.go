package model

// Qwen2 is Qwen2 / Qwen2.5: dense, with q/k/v biases.
const Qwen2 Arch = "qwen2"

type qwen2 struct{ baseArch }

func init() { register(qwen2{}) }

func (qwen2) Name() Arch { return Qwen2 }

func (qwen2) Features() Features {
	return Features{
		HFModelTypes:   []string{"qwen2"},
		HFClasses:      []string{"Qwen2ForCausalLM"},
		DefaultContext: 32768,
		// Qwen2Attention has biases on q, k and v whatever config.json says.
		QKVBias: true,
	}
}

// writeHF states what transformers' Qwen2 config would otherwise default
// differently: no sliding window.
func (qwen2) writeHF(_ *Config, text map[string]any) (map[string]any, error) {
	text["use_sliding_window"] = false
	return text, nil
}
