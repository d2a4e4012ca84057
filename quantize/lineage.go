package quantize

import (
	"fmt"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// Metadata keys recording how a model was made. A qmodel's chain of steps
// is KeyLineageSteps; step i started from the model whose fingerprint is
// KeyLineageSHA256[i], except the last step (the quantization that wrote
// the file), whose input is KeySourceSHA256. A derived model in memory (a
// sparse variant, a pruned model) has no source hash: its last step's
// input is the last KeyLineageSHA256 entry.
const (
	KeyLineageSHA256 = "qnnprep.lineage.sha256"
	KeyLineageSteps  = "qnnprep.lineage.steps"
)

// Lineage is the chain of steps that made a model: Steps[i] was applied to
// the model whose fingerprint is Inputs[i]. Inputs[0] is the origin. An
// original model (nothing qnnprep made) has an empty Lineage.
type Lineage struct {
	Inputs []string `json:"inputs"`
	Steps  []string `json:"steps"`
}

// LineageOf reads m's chain from its metadata. A qmodel written before the
// lineage keys existed has one step, its quantization.
func LineageOf(m *model.Model) Lineage {
	md := m.Metadata
	ins, _ := md.Strings(KeyLineageSHA256)
	steps, _ := md.Strings(KeyLineageSteps)
	l := Lineage{Inputs: append([]string(nil), ins...)}
	if s, ok := md.String(KeySourceSHA256); ok && s != "" {
		l.Inputs = append(l.Inputs, s)
	}
	l.Steps = append([]string(nil), steps...)
	// Keep the two lists the same length whatever the file says: a step
	// without a recorded name is named by the recipe, extra names dropped.
	for len(l.Steps) < len(l.Inputs) {
		r, _ := md.String(KeyRecipe)
		if r == "" {
			r = "(recipe not recorded)"
		}
		l.Steps = append(l.Steps, "quantize "+r)
	}
	l.Steps = l.Steps[:len(l.Inputs)]
	return l
}

// Origin is the fingerprint of the model the chain started from, or "".
func (l Lineage) Origin() string {
	if len(l.Inputs) == 0 {
		return ""
	}
	return l.Inputs[0]
}

// Derive returns the metadata of a model made from src by step: src's keys
// with src's chain extended by src's own fingerprint and step. The source
// hash is dropped (the new model is not the quantization of anything);
// quantizing it writes a new one.
func Derive(src *model.Model, step string) (gguf.Metadata, error) {
	sha, err := Fingerprint(src)
	if err != nil {
		return nil, fmt.Errorf("fingerprint of %s: %w", src.Path, err)
	}
	l := LineageOf(src)
	md := make(gguf.Metadata, 0, len(src.Metadata)+2)
	for _, kv := range src.Metadata {
		if kv.Key != KeySourceSHA256 {
			md = append(md, kv)
		}
	}
	md.Set(KeyLineageSHA256, append(l.Inputs, sha))
	md.Set(KeyLineageSteps, append(l.Steps, step))
	return md, nil
}

// StepCopied ends a quantize step whose every tensor was copied: the qmodel
// holds exactly the source's weights (a 1-bit model released in Q1_0
// through q1, any model through keep).
const StepCopied = " (every tensor copied)"

// setLineage adds a qmodel's chain to md: m's chain, then this
// quantization, whose input hash is the source hash written after the data.
func setLineage(md *gguf.Metadata, m *model.Model, recipe string, decisions []Decision) {
	l := LineageOf(m)
	step := "quantize " + recipe
	copied := true
	for _, d := range decisions {
		copied = copied && d.Copy
	}
	if copied {
		step += StepCopied
	}
	md.Set(KeyLineageSHA256, append([]string{}, l.Inputs...))
	md.Set(KeyLineageSteps, append(l.Steps, step))
}
