package golden

import (
	"fmt"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

// Default thresholds by what the artifact is next to the golden's source.
// They come from measurements (README, "Verdicts": 4 architectures × 2
// seeds × ordinary and 1-bit-native synthetic models, 4 prompts × 32
// tokens, per-prompt minima): each is below what every correct artifact of
// its kind reached and above what a broken one reached.
//
// The exact-match fraction is no measure of a lossy recipe's quality: one
// near-tie flipped early ends it (correct int8 and bf16 qmodels measured
// 0.03), so lossy recipes hold only top-1 and cosine to a minimum.
var defaultThresholds = map[string]Criteria{
	// The source itself, or a qmodel holding its weights unchanged: the
	// same tokens and logits.
	"same": {MinMatch: 1, MinTop1: 1, MinCosine: 0.9999, FailOnDegeneration: true},
	"keep": {MinMatch: 1, MinTop1: 1, MinCosine: 0.9999, FailOnDegeneration: true},
	// f16: top-1 ≥ 0.938, cosine ≥ 0.99999 measured.
	"f16": {MinTop1: 0.9, MinCosine: 0.9999, FailOnDegeneration: true},
	// Attention-only models (llama, qwen2, qwen3): correct int8, q8_0,
	// bf16 and q1-of-1-bit-native qmodels reached top-1 ≥ 0.906 and cosine
	// ≥ 0.99992; a reversed matrix top-1 ≤ 0.31 and cosine ≤ 0.977, a
	// reversed output norm cosine ≤ 0.99896, an unrelated model top-1 0.
	// Cosine separates them; top-1 is a second line with room for short
	// runs (a correct q8_0 build scored 2 of 4 on one prompt of -n 4).
	"bf16": {MinTop1: 0.5, MinCosine: 0.9995, FailOnDegeneration: true},
	"int8": {MinTop1: 0.5, MinCosine: 0.9995, FailOnDegeneration: true},
	"q8_0": {MinTop1: 0.5, MinCosine: 0.9995, FailOnDegeneration: true},
	// q1 is for models trained for 1-bit weights, which it stores without
	// loss; what remains is the Q8_0 rounding of the activations, measured
	// like q8_0's. A model not trained for 1-bit weights fails (top-1 near
	// 0): that loss is real and the verdict says so.
	"q1": {MinTop1: 0.5, MinCosine: 0.9995, FailOnDegeneration: true},
	// Anything else (sparse variants, other ggml types): a floor that an
	// unrelated model or a scrambled matrix does not reach, not a quality
	// bar.
	"floor": {MinTop1: 0.5, MinCosine: 0.9, FailOnDegeneration: true},
}

// hybridThresholds replace the lossy recipes' for models with Gated
// DeltaNet layers (qwen35, qwen3next), whose recurrence carries rounding
// further: correct int8 and q8_0 qmodels reached top-1 ≥ 0.56 and cosine
// ≥ 0.977 per prompt, a reversed matrix top-1 ≤ 0.03 and cosine ≤ 0.43, an
// unrelated model top-1 0. (A reversed output norm, top-1 ≥ 0.5 and cosine
// ≥ 0.974, is within that noise and not caught by these defaults.)
var hybridThresholds = Criteria{MinTop1: 0.25, MinCosine: 0.95, FailOnDegeneration: true}

// lossOrder ranks the recipes by how far their qmodels may drift, least
// first; a chain of quantizations is held to its lossiest step. Entry 0
// stands for a step that copied every tensor (no recipe has its name).
var lossOrder = []string{"", "f16", "bf16", "int8", "q8_0", "q1"}

// DefaultCriteria returns the thresholds verify and build apply to m, which
// a was accepted for, unless flags say otherwise: exact for the golden's
// own source, per recipe for a qmodel (its lossiest quantization step),
// per dominant matrix type for a GGUF made elsewhere, and a floor for
// sparse and pruned variants. Without top-k logits in f there is no cosine
// to hold to a minimum.
func (f *File) DefaultCriteria(m *model.Model, a *Acceptance) Criteria {
	kind, basis := comparison(m, a)
	c := defaultThresholds[kind]
	if hybrid(m.Config) && (kind == "bf16" || kind == "int8" || kind == "q8_0" || kind == "q1") {
		c = hybridThresholds
		basis += ", Gated DeltaNet hybrid"
	}
	c.Basis = basis
	if f.Settings.TopK == 0 {
		c.MinCosine = 0
		c.Basis += "; no top-k in the golden, so no cosine minimum"
	}
	return c
}

// comparison names the defaultThresholds entry for m and says why.
func comparison(m *model.Model, a *Acceptance) (kind, basis string) {
	switch a.Rule {
	case RuleSameModel:
		return "same", "default for the golden's own source model"
	case RuleOverride:
		t := dominantMatrixType(m)
		switch t {
		case gguf.F32:
			return "keep", "default for an F32 model made elsewhere"
		case gguf.F16:
			return "f16", "default for an F16 model made elsewhere"
		case gguf.BF16:
			return "bf16", "default for a BF16 model made elsewhere"
		case gguf.Q8_0:
			return "q8_0", "default for a Q8_0 model made elsewhere"
		case gguf.Q1_0, gguf.Q2_0:
			return "q1", "default for a 1-bit model made elsewhere"
		}
		return "floor", fmt.Sprintf("floor for a %v model made elsewhere (no measured default for that type)", t)
	}
	worst := -1
	for _, s := range a.Steps {
		r, ok := strings.CutPrefix(s, "quantize ")
		if ok && strings.HasSuffix(r, quantize.StepCopied) {
			// The weights are the source's bytes: lossless, whatever the recipe.
			worst = max(worst, 0)
			continue
		}
		if !ok {
			return "floor", fmt.Sprintf("floor for a model made by %q (no measured default)", s)
		}
		i := index(lossOrder, r)
		if i <= 0 {
			return "floor", fmt.Sprintf("floor for recipe %q (no measured default)", r)
		}
		worst = max(worst, i)
	}
	if worst < 0 {
		return "same", "default for the golden's own source model"
	}
	if worst == 0 {
		return "keep", "default for a qmodel that copied every tensor of its source"
	}
	return lossOrder[worst], fmt.Sprintf("default for recipe %s against its source", lossOrder[worst])
}

// hybrid reports whether cfg has Gated DeltaNet layers.
func hybrid(cfg model.Config) bool {
	for _, k := range cfg.LayerKinds {
		if k == model.DeltaNet {
			return true
		}
	}
	return false
}

func index(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// dominantMatrixType is the type holding most elements of m's 2-D tensors.
func dominantMatrixType(m *model.Model) gguf.Type {
	n := map[gguf.Type]int64{}
	best := gguf.F32
	for _, t := range m.Tensors {
		if len(t.Dims) == 2 {
			n[t.Type] += t.Elements()
			if n[t.Type] > n[best] {
				best = t.Type
			}
		}
	}
	return best
}

// Overrides are thresholds given explicitly (flags); nil keeps the
// default.
type Overrides struct {
	MinMatch, MinTop1, MinCosine *float64
	FailOnDegeneration           *bool
}

// With returns c with the given overrides applied, its Basis saying which.
func (c Criteria) With(o Overrides) Criteria {
	var given []string
	set := func(dst *float64, v *float64, name string) {
		if v != nil {
			*dst = *v
			given = append(given, name)
		}
	}
	set(&c.MinMatch, o.MinMatch, "min-match")
	set(&c.MinTop1, o.MinTop1, "min-top1")
	set(&c.MinCosine, o.MinCosine, "min-cosine")
	if o.FailOnDegeneration != nil {
		c.FailOnDegeneration = *o.FailOnDegeneration
		given = append(given, "fail-on-degeneration")
	}
	if len(given) > 0 {
		if c.Basis != "" {
			c.Basis += "; "
		}
		c.Basis += strings.Join(given, ", ") + " given"
	}
	return c
}
