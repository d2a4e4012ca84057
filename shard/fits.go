package shard

import (
	"errors"
	"fmt"
	"strings"

	"github.com/qnnprep/qnnprep/internal/bytesize"
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

// SizedFor refuses a plan whose stage sizes are not m's. Fits compares
// shapes only, and two models of one shape (an F32 file and its Q8_0
// quantization) differ in what their stages weigh: a plan made for one
// would give the other's graphs and bundle its stage bytes, which the
// manifest then states and Check's stage rules (RuleContextBytes by the
// bytes, RuleVTCMOneBit by the weight type) judge. SizedFor measures m as the planner does (ModelSizes in the
// plan's container) and compares every stage's device bytes, qmodel bytes
// and weight type with the plan's. Call it, after Fits, wherever a plan
// meets the weights its graphs or bundle are made from.
func (p *Plan) SizedFor(m *model.Model) error {
	s, err := ModelSizes(m, p.Container)
	if err != nil {
		return err
	}
	embed, head := p.endBytes(&s)
	var first string
	differ := 0
	for i := range p.Stages {
		st := &p.Stages[i]
		if st.FirstLayer < 0 || st.LastLayer >= len(s.Layers) || st.LastLayer < st.FirstLayer {
			return fmt.Errorf("stage %d covers layers %d–%d, but %s has %d layers", i, st.FirstLayer, st.LastLayer, m.Path, len(s.Layers))
		}
		dev, q, wt := s.stage(st, s.LayerTypes, m.Config.TiedEmbeddings, embed, head)
		var d string
		switch {
		case dev != st.Bytes:
			d = fmt.Sprintf("stage %d %s on the device (%s container), this model %s", i, sizePair(st.Bytes, dev), p.Container, sizePair(dev, st.Bytes))
		case q != st.QModelBytes:
			d = fmt.Sprintf("stage %d %s in the qmodel, this model %s", i, sizePair(st.QModelBytes, q), sizePair(q, st.QModelBytes))
		case wt != st.WeightType:
			d = fmt.Sprintf("stage %d %s weights, this model %s", i, orUnknown(st.WeightType), orUnknown(wt))
		default:
			continue
		}
		if differ == 0 {
			first = d
		}
		differ++
	}
	if differ == 0 {
		return nil
	}
	if differ > 1 {
		first += fmt.Sprintf(" (%d of %d stages differ)", differ, len(p.Stages))
	}
	return fmt.Errorf("sized for other weights: %s; run `qnnprep plan %s` (with the flags that made this plan) for a plan of this model", first, m.Path)
}

// sizePair formats a, exactly when b would look the same rounded.
func sizePair(a, b int64) string {
	if bytesize.Format(a) == bytesize.Format(b) {
		return fmt.Sprintf("%d bytes", a)
	}
	return bytesize.Format(a)
}

func orUnknown(t string) string {
	if t == "" {
		return "unknown"
	}
	return t
}
