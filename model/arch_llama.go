package model

// Llama is Meta's Llama (1–3): dense, SwiGLU, ggml NORM rope.
const Llama Arch = "llama"

type llama struct{ baseArch }

func init() { register(llama{}) }

func (llama) Name() Arch { return Llama }

func (llama) Features() Features {
	return Features{
		HFModelTypes:   []string{"llama"},
		HFClasses:      []string{"LlamaForCausalLM"},
		DefaultContext: 2048,
		// llama.cpp's converter permutes q/k to ggml's NORM layout.
		NormRope:  true,
		RopeFreqs: true,
	}
}
