package sparse

import (
	"fmt"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// MeasureEffective sets each reported tensor's Effective sparsity: the
// fraction of its values that are exactly zero in artifact (the variant
// as written, usually quantized), and a Note where Q1_0 lost zeros. It
// reads one tensor at a time.
func (r *Report) MeasureEffective(artifact *model.Model) error {
	for i := range r.Tensors {
		tr := &r.Tensors[i]
		t := artifact.Tensor(tr.Name)
		if t == nil {
			return fmt.Errorf("sparse: %s: tensor %s missing from the artifact", artifact.Path, tr.Name)
		}
		w, err := t.Float32()
		if err != nil {
			return fmt.Errorf("sparse: %s: %w", artifact.Path, err)
		}
		var z int64
		for _, x := range w {
			if x == 0 {
				z++
			}
		}
		f := float64(z) / float64(len(w))
		tr.Effective = &f
		if t.Type == gguf.Q1_0 && f < tr.Sparsity {
			tr.Note = "Q1_0 holds no zeros: each weight is ±d (d = mean|x| of its block of 128, zeros included), so only all-zero blocks stay zero"
		}
	}
	return nil
}

// EffectiveSparsity is the fraction of exact zeros over the reported
// tensors after MeasureEffective, or -1 before.
func (r *Report) EffectiveSparsity() float64 {
	var z, n float64
	for _, t := range r.Tensors {
		if t.Effective == nil {
			return -1
		}
		z += *t.Effective * float64(t.Elements)
		n += float64(t.Elements)
	}
	if n == 0 {
		return 0
	}
	return z / n
}

// Metadata keys a sparse variant's qmodel carries.
const (
	KeyPattern   = "qnnprep.sparsity.pattern"
	KeySelection = "qnnprep.sparsity.selection"
	KeyTarget    = "qnnprep.sparsity.target"
	KeyAchieved  = "qnnprep.sparsity.achieved"
	KeyRemoved   = "qnnprep.sparsity.structure_removed"
)

// Metadata returns the qnnprep.sparsity.* keys describing the variant.
func (r *Report) Metadata() gguf.Metadata {
	md := gguf.Metadata{
		{Key: KeyPattern, Value: r.Pattern},
		{Key: KeySelection, Value: r.Method},
		{Key: KeyTarget, Value: float32(r.Target)},
		{Key: KeyAchieved, Value: float32(r.Sparsity)},
	}
	if r.Removed != nil {
		md = append(md, gguf.KV{Key: KeyRemoved, Value: float32(r.StructureSparsity)})
	}
	return md
}
