package model

import (
	"fmt"

	"github.com/qnnprep/qnnprep/gguf"
)

// Qwen35 is Qwen3.5: the Qwen3-Next hybrid with llama.cpp's tiled value
// heads and interleaved M-RoPE (plain NEOX rope for text), usually as the
// language model of a multimodal checkpoint.
const Qwen35 Arch = "qwen35"

type qwen35 struct{ baseArch }

func init() { register(qwen35{}) }

func (qwen35) Name() Arch { return Qwen35 }

func (qwen35) Features() Features {
	return Features{
		HFModelTypes:         []string{"qwen3_5", "qwen3_5_text"},
		HFClasses:            []string{"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"},
		HFTextPrefix:         "model.language_model.",
		DefaultHeadDim:       256,
		DefaultContext:       32768,
		DefaultPartialRotary: 0.25,
		QKNorm:               true,
		GatedAttention:       true,
		DeltaNet:             true,
		// Both sources present value heads tiled (llama.cpp's order).
		TiledValueHeads:   true,
		ZeroCentredNorms:  true,
		PostAttentionNorm: true,
		MRoPE:             true,
		MTP:               true,
	}
}

// parseHF reads the M-RoPE sections (t, h, w): three pair counts, the
// fourth (e) zero.
func (qwen35) parseHF(j *hfJSON, c *Config) error {
	c.MRopeSections = []int{11, 11, 10, 0}
	v, ok := j.rope("mrope_section")
	if !ok {
		return nil
	}
	list, _ := v.([]any)
	if len(list) < 1 || len(list) > 4 {
		return fmt.Errorf("mrope_section: want 3 integers, got %s", show(v))
	}
	c.MRopeSections = make([]int, 4)
	for i, e := range list {
		n, ok := asInt(e)
		if !ok {
			return fmt.Errorf("mrope_section: want 3 integers, got %s", show(v))
		}
		c.MRopeSections[i] = n
	}
	return nil
}

// writeHF writes the multimodal form: the rope in rope_parameters, the
// language model under text_config.
func (qwen35) writeHF(c *Config, text map[string]any) (map[string]any, error) {
	if c.MRopeSections[3] != 0 {
		return nil, fmt.Errorf("mrope section 4 (%d) cannot be written as config.json", c.MRopeSections[3])
	}
	delete(text, "rope_theta")
	delete(text, "partial_rotary_factor")
	text["model_type"] = "qwen3_5_text"
	text["rope_parameters"] = map[string]any{
		"rope_type":             "default",
		"rope_theta":            c.RopeTheta,
		"partial_rotary_factor": float64(c.RopeDim) / float64(c.HeadDim),
		"mrope_interleaved":     true,
		"mrope_section":         c.MRopeSections[:3],
	}
	text["attn_output_gate"] = true
	text["mtp_num_hidden_layers"] = 0
	return map[string]any{
		"model_type":          "qwen3_5",
		"text_config":         text,
		"tie_word_embeddings": c.TiedEmbeddings,
	}, nil
}

func (qwen35) parseGGUF(r *mdReader, p string, c *Config) {
	secs, ok := r.md.Int32s(p + "rope.dimension_sections")
	if !ok || len(secs) < 3 || len(secs) > 4 {
		r.errs = append(r.errs, fmt.Sprintf("key %srope.dimension_sections: want 4 integers", p))
		return
	}
	c.MRopeSections = make([]int, 4)
	for i, s := range secs {
		c.MRopeSections[i] = int(s)
	}
}

func (qwen35) writeGGUF(c *Config, md *gguf.Metadata, p string) {
	secs := make([]int32, len(c.MRopeSections))
	for i, s := range c.MRopeSections {
		secs[i] = int32(s)
	}
	md.Set(p+"rope.dimension_sections", secs)
}

func (qwen35) validate(c *Config, bad func(format string, a ...any)) {
	if len(c.MRopeSections) != 4 {
		bad("%d mrope_sections, want 4", len(c.MRopeSections))
	}
	sum := 0
	for _, s := range c.MRopeSections {
		if s < 0 || s > maxHeadDim {
			bad("mrope_sections %v out of range", c.MRopeSections)
			break
		}
		sum += s
	}
	if sum > c.RopeDim/2 {
		bad("mrope_sections %v cover %d pairs, more than rope_dim/2 = %d", c.MRopeSections, sum, c.RopeDim/2)
	}
}
