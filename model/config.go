// Package model is the canonical view of a language model, whatever file it
// came from: its architecture, hyper-parameters and tensors under llama.cpp's
// GGUF names, with the transforms that make a Hugging Face checkpoint and its
// GGUF conversion hold the same numbers.
package model

import "fmt"

// Arch is a supported architecture, named as GGUF's general.architecture.
// Each has a file of its own (see Architecture).
type Arch string

// LayerKind says what mixes tokens in a layer.
type LayerKind uint8

const (
	// Attention is softmax attention with a KV cache.
	Attention LayerKind = iota
	// DeltaNet is a Gated DeltaNet (linear attention) layer with conv and
	// recurrent state.
	DeltaNet
)

func (k LayerKind) String() string {
	switch k {
	case Attention:
		return "attention"
	case DeltaNet:
		return "deltanet"
	}
	return fmt.Sprintf("LayerKind(%d)", uint8(k))
}

// MarshalText gives the kind's name, so JSON shows a list of names
// rather than base64 bytes.
func (k LayerKind) MarshalText() ([]byte, error) {
	if k != Attention && k != DeltaNet {
		return nil, fmt.Errorf("model: unknown layer kind %d", uint8(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText reads a name written by MarshalText.
func (k *LayerKind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "attention":
		*k = Attention
	case "deltanet":
		*k = DeltaNet
	default:
		return fmt.Errorf("model: unknown layer kind %q (want attention or deltanet)", b)
	}
	return nil
}

// Config holds the hyper-parameters the runtime, the planner and the
// exporters need. Values are in the GGUF convention: for example RopeDim is
// the number of rotated dimensions per head, and norms in a GGUF model are
// always plain w ⊙ x̂ (the +1 of zero-centred norms is folded into the
// weights when reading a Hugging Face checkpoint).
type Config struct {
	Arch Arch `json:"arch"`

	VocabSize     int `json:"vocab_size"`
	Hidden        int `json:"hidden"`   // embedding width
	Layers        int `json:"layers"`   // decoder layers (without MTP blocks)
	FFN           int `json:"ffn"`      // SwiGLU intermediate width
	Heads         int `json:"heads"`    // query heads
	KVHeads       int `json:"kv_heads"` // key/value heads
	HeadDim       int `json:"head_dim"` // per-head width of q, k and v
	ContextLength int `json:"context_length"`

	RMSEps    float32 `json:"rms_eps"`
	RopeTheta float64 `json:"rope_theta"`
	RopeDim   int     `json:"rope_dim"` // rotated dims per head (partial rotary < HeadDim)
	// RopeNeox selects NEOX rotation (dimension i with i+RopeDim/2); false
	// is ggml's NORM mode (adjacent pairs), which llama GGUFs use.
	RopeNeox bool `json:"rope_neox"`
	// RopeFreqFactors, when set, divides each rotation frequency (Llama 3
	// rope scaling, GGUF rope_freqs.weight); length RopeDim/2.
	RopeFreqFactors []float32 `json:"rope_freq_factors,omitempty"`
	// RopeScaling is the scaling scheme and its parameters (for llama3,
	// the parameters RopeFreqFactors were made from, when known).
	RopeScaling RopeScaling `json:"rope_scaling,omitzero"`
	// MRopeSections are the M-RoPE sections (t, h, w, e) in rotation pairs
	// (qwen35 only, GGUF rope.dimension_sections, usually [11 11 10 0]).
	// For text all positions are equal and M-RoPE is NEOX rope.
	MRopeSections []int `json:"mrope_sections,omitempty"`

	TiedEmbeddings bool `json:"tied_embeddings"` // no output.weight: the head is token_embd
	QKVBias        bool `json:"qkv_bias"`        // qwen2
	QKNorm         bool `json:"qk_norm"`         // qwen3, qwen3next, qwen35
	// AttnOutputGate: attn_q holds q and a sigmoid gate per head,
	// interleaved [q_h (HeadDim) | gate_h (HeadDim)] (qwen3next, qwen35).
	AttnOutputGate bool `json:"attn_output_gate"`

	// Per-layer mixer; len == Layers. All Attention for dense models.
	LayerKinds []LayerKind `json:"layer_kinds"`

	// Gated DeltaNet sizes (zero for dense models).
	ConvKernel    int `json:"conv_kernel,omitempty"`     // K
	SSMKeyHeads   int `json:"ssm_key_heads,omitempty"`   // Hk
	SSMValueHeads int `json:"ssm_value_heads,omitempty"` // Hv
	SSMKeyDim     int `json:"ssm_key_dim,omitempty"`     // Dk
	SSMValueDim   int `json:"ssm_value_dim,omitempty"`   // Dv
	// SSMTiledHeads: value head h uses key head h mod Hk (qwen35 GGUF
	// order); otherwise h / (Hv/Hk) (qwen3next, and HF checkpoints).
	SSMTiledHeads bool `json:"ssm_tiled_heads,omitempty"`

	BOS int `json:"bos"` // -1 when unknown
	EOS int `json:"eos"` // -1 when unknown
}

// Hybrid reports whether any layer is a Gated DeltaNet layer.
func (c *Config) Hybrid() bool {
	for _, k := range c.LayerKinds {
		if k == DeltaNet {
			return true
		}
	}
	return false
}

// ConvDim is the GDN conv channel count: 2·Hk·Dk + Hv·Dv.
func (c *Config) ConvDim() int {
	return 2*c.SSMKeyHeads*c.SSMKeyDim + c.SSMValueHeads*c.SSMValueDim
}
