package shard

import (
	"errors"
	"fmt"
	"strings"

	"github.com/qnnprep/qnnprep/model"
)

// Fits reports, in one error listing them, every way the plan does not describe a model
// of configuration c: architecture, sizes, layer kinds, DeltaNet state
// sizes, rotary dims, a CL above the model's context length, and stages
// that do not cover the layers in order.
// The exporters and the staged executor refuse such a plan before using it.
func (p *Plan) Fits(c model.Config) error {
	pm := &p.Model
	var bad []string
	eq := func(key string, plan, mod int) {
		if plan != mod {
			bad = append(bad, fmt.Sprintf("%s %d (model %d)", key, plan, mod))
		}
	}
	if pm.Arch != string(c.Arch) {
		bad = append(bad, fmt.Sprintf("arch %q (model %q)", pm.Arch, c.Arch))
	}
	eq("layers", pm.Layers, c.Layers)
	eq("hidden", pm.Hidden, c.Hidden)
	eq("ffn", pm.FFN, c.FFN)
	eq("vocab", pm.Vocab, c.VocabSize)
	eq("heads", pm.Heads, c.Heads)
	eq("kv_heads", pm.KVHeads, c.KVHeads)
	eq("head_dim", pm.HeadDim, c.HeadDim)
	if c.Hybrid() {
		eq("conv_kernel", pm.ConvKernel, c.ConvKernel)
		eq("conv_dim", pm.ConvDim, c.ConvDim())
		eq("ssm_value_heads", pm.SSMValueHeads, c.SSMValueHeads)
		eq("ssm_key_dim", pm.SSMKeyDim, c.SSMKeyDim)
		eq("ssm_value_dim", pm.SSMValueDim, c.SSMValueDim)
	}
	if len(pm.LayerKinds) != len(c.LayerKinds) {
		bad = append(bad, fmt.Sprintf("%d layer kinds (model %d)", len(pm.LayerKinds), len(c.LayerKinds)))
	} else {
		for i, k := range c.LayerKinds {
			if pm.LayerKinds[i] != k.String() {
				bad = append(bad, fmt.Sprintf("layer %d is %s (model %s)", i, pm.LayerKinds[i], k))
				break
			}
		}
	}
	switch p.Positional {
	case Rope:
		eq("rotary_dim", pm.RotaryDim, c.RopeDim)
		eq("rope_dim", p.RopeDim, c.RopeDim/2)
	case Absolute:
	default:
		bad = append(bad, fmt.Sprintf("positional encoding %q (want rope or absolute)", p.Positional))
	}
	for _, v := range p.Variants {
		if c.ContextLength > 0 && v.CL > c.ContextLength {
			bad = append(bad, fmt.Sprintf("CL %d above the model's context length %d", v.CL, c.ContextLength))
			break
		}
	}
	next := 0
	for k, st := range p.Stages {
		if st.Index != k || st.FirstLayer != next || st.LastLayer < st.FirstLayer || st.LastLayer >= c.Layers {
			bad = append(bad, fmt.Sprintf("stage %d covers layers %d–%d, want a range starting at %d within %d layers", k, st.FirstLayer, st.LastLayer, next, c.Layers))
			break
		}
		if st.Embedding != (k == 0) || st.Head != (k == len(p.Stages)-1) {
			bad = append(bad, fmt.Sprintf("stage %d: the embedding must be in the first stage and the head in the last", k))
			break
		}
		next = st.LastLayer + 1
	}
	if next != c.Layers && len(bad) == 0 {
		bad = append(bad, fmt.Sprintf("stages cover %d of %d layers", next, c.Layers))
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, ", "))
	}
	return nil
}
