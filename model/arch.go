package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
)

// An Architecture is one supported model family. Each lives in a file of
// its own (arch_llama.go, arch_qwen35.go, …) that registers it; everything
// else, in this package and above it, asks for its Features instead of
// comparing names, so a new architecture is a new file.
//
// The hooks cover what Features cannot say as data; they run after the
// common code has read what every architecture shares (sizes, norms,
// rope base and scaling), so they see and may refine a filled Config. An
// architecture embeds baseArch for the hooks it does not need.
type Architecture interface {
	// Name is GGUF's general.architecture.
	Name() Arch
	// Features are the traits every model of the architecture has.
	Features() Features

	// parseHF reads the architecture's own config.json keys into c, whose
	// common fields (sizes, rope, norms, layer kinds, Gated DeltaNet
	// sizes) are already set.
	parseHF(j *hfJSON, c *Config) error
	// writeHF adds the architecture's own config.json keys to text (the
	// language model's object) and returns the top-level object.
	writeHF(c *Config, text map[string]any) (map[string]any, error)
	// parseGGUF reads the architecture's own {arch}.* keys (p is the
	// "{arch}." prefix) into c, reporting problems to r.
	parseGGUF(r *mdReader, p string, c *Config)
	// writeGGUF sets them in md.
	writeGGUF(c *Config, md *gguf.Metadata, p string)
	// validate reports what is wrong with the architecture's own fields.
	validate(c *Config, bad func(format string, a ...any))
	// fromGGUF adjusts the tensors read from a GGUF file (byName) to the
	// canonical set, for example by splitting a fused tensor; problems
	// and skip are as in arrange.
	fromGGUF(c *Config, byName map[string]*Tensor, skip map[string]bool, problems []string) []string
}

// Features are the fixed traits of an architecture: the Config values its
// models must have, the defaults of its Hugging Face config.json, and the
// layout of its Hugging Face checkpoint.
type Features struct {
	// HFModelTypes are the config.json model_type values (top level or
	// in text_config) that select the architecture, HFClasses the
	// transformers classes (architectures[0]) that do when model_type is
	// absent. The first of each is what HFConfigJSON writes.
	HFModelTypes []string
	HFClasses    []string
	// HFTextPrefix is where a multimodal checkpoint keeps the language
	// model's tensors ("model.language_model."); "model." is the default.
	HFTextPrefix string
	// HFLayerNames maps layer tensors the architecture names differently
	// from transformers' llama (hfLayerNames), after "layers.N.", to
	// llama.cpp's names after "blk.N.".
	HFLayerNames map[string]string

	// Defaults for keys config.json may omit, as in the transformers
	// config class: head_dim (0: hidden_size / num_attention_heads),
	// max_position_embeddings and partial_rotary_factor (0: 1).
	DefaultHeadDim       int
	DefaultContext       int
	DefaultPartialRotary float64
	// DefaultExperts is num_experts when config.json omits it; a layer
	// with experts is mixture-of-experts (not supported) unless
	// mlp_only_layers or decoder_sparse_step exempt it.
	DefaultExperts int

	// NormRope: ggml's NORM rope (adjacent pairs), so the Hugging Face q
	// and k rows are permuted from rotate-half order (llama); otherwise
	// NEOX.
	NormRope bool
	// QKVBias: q, k and v always have biases (qwen2); otherwise
	// config.json's attention_bias (or the GGUF tensors) say.
	QKVBias bool
	// QKNorm: per-head RMS norms on q and k.
	QKNorm bool
	// GatedAttention: attn_q holds q and a sigmoid output gate per head
	// (Config.AttnOutputGate).
	GatedAttention bool
	// DeltaNet: some layers are Gated DeltaNet layers (a hybrid), with
	// llama.cpp's ssm.* keys and tensors.
	DeltaNet bool
	// FusedDeltaNetHF: the checkpoint holds a Gated DeltaNet layer's
	// projections fused per key head (in_proj_qkvz, in_proj_ba); both
	// forms are read, this says which one is written.
	FusedDeltaNetHF bool
	// TiledValueHeads: GGUF value head h uses key head h mod Hk
	// (Config.SSMTiledHeads); Hugging Face checkpoints group them.
	TiledValueHeads bool
	// ZeroCentredNorms: the checkpoint's RMS norm weights are w−1
	// (x̂·(1+w)), except the Gated DeltaNet output norm.
	ZeroCentredNorms bool
	// PostAttentionNorm: the FFN's input norm is llama.cpp's
	// post_attention_norm, not ffn_norm.
	PostAttentionNorm bool
	// MRoPE: multimodal rope sections (Config.MRopeSections), which the
	// architecture's hooks read, write and check.
	MRoPE bool
	// RopeFreqs: llama.cpp applies rope_freqs.weight (Llama 3 rope
	// scaling) and its converter writes it; other architectures ignore
	// the tensor, so llama3 scaling is refused for them.
	RopeFreqs bool
	// MTP: GGUF files may append nextn_predict_layers multi-token
	// prediction blocks after the decoder layers.
	MTP bool
}

// baseArch is the no-op hooks an architecture embeds.
type baseArch struct{}

func (baseArch) parseHF(*hfJSON, *Config) error { return nil }
func (baseArch) writeHF(_ *Config, text map[string]any) (map[string]any, error) {
	return text, nil
}
func (baseArch) parseGGUF(*mdReader, string, *Config)            {}
func (baseArch) writeGGUF(*Config, *gguf.Metadata, string)       {}
func (baseArch) validate(*Config, func(format string, a ...any)) {}
func (baseArch) fromGGUF(_ *Config, _ map[string]*Tensor, _ map[string]bool, p []string) []string {
	return p
}

// registry holds the architectures by name.
var registry = map[Arch]Architecture{}

// register adds a; it panics on an empty or duplicate name, a
// programming error.
// The returned function removes it again (for tests).
func register(a Architecture) (unregister func()) {
	name := a.Name()
	if _, dup := registry[name]; dup || name == "" {
		panic(fmt.Sprintf("model: architecture %q registered twice or unnamed", name))
	}
	registry[name] = a
	return func() { delete(registry, name) }
}

// Lookup returns the architecture named a.
func Lookup(a Arch) (Architecture, bool) {
	arch, ok := registry[a]
	return arch, ok
}

// Architectures returns the supported architectures, sorted by name.
func Architectures() []Architecture {
	out := make([]Architecture, 0, len(registry))
	for _, a := range registry {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Architecture) int { return strings.Compare(string(a.Name()), string(b.Name())) })
	return out
}

// Features returns the features of a, or none for an unsupported name.
func (a Arch) Features() Features {
	if arch, ok := registry[a]; ok {
		return arch.Features()
	}
	return Features{}
}

// supportedList names the architectures for messages.
func supportedList() string {
	var s []string
	for _, a := range Architectures() {
		s = append(s, string(a.Name()))
	}
	return strings.Join(s, ", ")
}

// hfSupportedList names them as config.json's model_type does.
func hfSupportedList() string {
	var s []string
	for _, a := range Architectures() {
		if t := a.Features().HFModelTypes; len(t) > 0 {
			s = append(s, t[0])
		}
	}
	return strings.Join(s, ", ")
}

// hfByType finds the architecture for a config.json model_type.
func hfByType(modelType string) (Architecture, bool) {
	for _, a := range Architectures() {
		if modelType != "" && slices.Contains(a.Features().HFModelTypes, modelType) {
			return a, true
		}
	}
	return nil, false
}

// hfByClass finds the architecture for a transformers class name.
func hfByClass(class string) (Architecture, bool) {
	for _, a := range Architectures() {
		if class != "" && slices.Contains(a.Features().HFClasses, class) {
			return a, true
		}
	}
	return nil, false
}
