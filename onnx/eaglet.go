package onnx

import (
	"fmt"
	"slices"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// Eagle3Head is an EAGLE-3 draft head for an eaglet plan (shard.DraftPlan;
// shard/EAGLET.md): its tensors in llama.cpp's eagle3 GGUF layout (fc.weight,
// blk.0.*, output_norm.weight, output.weight) and the settings its graph
// needs beyond the plan's shapes.
type Eagle3Head struct {
	Tensors            []*model.Tensor
	RMSEps             float32
	NormBeforeResidual bool // the residual is norm(g), not g
	RopeNeox           bool // rotate i with i+D/2 (HF q/k); false: adjacent pairs (GGUF)
}

func (h *Eagle3Head) model() *model.Model {
	return &model.Model{Path: "EAGLE-3 head", Tensors: h.Tensors}
}

// tap records the input of layer l (b.x before it runs) when the plan's
// head reads it and stage st computes it: as the eagle3_tap_l output, or
// for the last stage's own fc in taps.
func (b *builder) tap(st *shard.Stage, l int, taps map[int]string) {
	d := b.p.Draft
	if d == nil || !slices.Contains(d.Head.ExtractLayers[:], l) || b.p.TapStage(l) != st.Index {
		return
	}
	if !st.Head {
		b.g.Named(shard.Eagle3Tap(l), "Identity", []string{b.x})
		return
	}
	taps[l] = b.x
}

// lastHiddenStates is the final hidden states, or with an eaglet draft
// the head's fc over the three taps (shard/EAGLET.md).
func (b *builder) lastHiddenStates(taps map[int]string) error {
	d := b.p.Draft
	if d == nil {
		b.g.Named(shard.LastHiddenStates, "Identity", []string{b.x})
		return nil
	}
	h := b.opts.Eagle3
	if h == nil {
		return fmt.Errorf("%s is the EAGLE-3 head's fc over the taps, but no head was given (Options.Eagle3)", shard.LastHiddenStates)
	}
	var parts []string
	for _, l := range d.Head.ExtractLayers {
		name, ok := taps[l]
		if !ok {
			name = shard.Eagle3Tap(l)
			if b.pg.Input(name) == nil {
				return fmt.Errorf("no input %s for the head's fc", name)
			}
		}
		parts = append(parts, name)
	}
	hm := h.model()
	if t := hm.Tensor("fc.weight"); t != nil {
		// The plan's last stage bytes count fc as the planned head's.
		dev, err := shard.DeviceBytes(t, b.p.Container)
		if err != nil {
			return fmt.Errorf("EAGLE-3 head: %w", err)
		}
		if dev != d.Head.FCBytes {
			return fmt.Errorf("EAGLE-3 head: fc.weight is %d bytes on the device (%s container), the plan counts %d for it: plan with this head", dev, b.p.Container, d.Head.FCBytes)
		}
	}
	cat := b.opAttr("Concat", parts, AttrInt("axis", 2))
	fc, err := b.matrixOf(hm, "fc.weight", "fc.weight")
	if err != nil {
		return fmt.Errorf("EAGLE-3 head: %w", err)
	}
	b.g.Named(shard.LastHiddenStates, "MatMul", []string{cat, fc})
	return nil
}

// BuildDraft builds the ONNX graph of one eaglet draft graph of plan p
// (p.Draft.Graphs) from the head in opts.Eagle3, with its QNN encodings:
// x = [norm(embedding) | norm(hidden_states)], one Llama attention block
// over the draft's past_key/value_0, the SwiGLU MLP, last_hidden_states =
// the pre-norm output, logits = lm_head(norm(·)) over the draft vocabulary.
func BuildDraft(p *shard.Plan, dg *shard.Graph, opts Options) (*Graph, *Encodings, error) {
	h := opts.Eagle3
	d := p.Draft
	switch {
	case d == nil:
		return nil, nil, fmt.Errorf("onnx: plan %s has no eaglet draft", p.Model.Name)
	case h == nil:
		return nil, nil, fmt.Errorf("onnx: draft graph %s: no EAGLE-3 head given", dg.Name)
	case p.Positional != shard.Rope:
		return nil, nil, fmt.Errorf("onnx: draft graph %s: eaglet drafts a tree, which needs RoPE positions", dg.Name)
	}
	if opts.Opset == 0 {
		opts.Opset = 17
	}
	if opts.Container == 0 {
		opts.Container = p.Container
	}
	hd := d.Head
	cfg := model.Config{Hidden: hd.Hidden, FFN: hd.FFN, Heads: hd.Heads, KVHeads: hd.KVHeads, HeadDim: hd.HeadDim,
		RopeDim: hd.HeadDim, RopeNeox: h.RopeNeox, RMSEps: h.RMSEps, Layers: 1}
	b := &builder{
		g: NewGraph(dg.Name), m: h.model(), c: cfg, p: p, pg: dg, opts: opts,
		ar: int64(dg.AR), cl: int64(dg.CL),
		consts: map[string]string{}, weights: map[string]string{},
		enc: &Encodings{Version: EncodingsVersion, ActivationEncodings: []Encoding{}, ParamEncodings: []Encoding{}},
	}
	if err := b.buildDraft(h); err != nil {
		return nil, nil, fmt.Errorf("onnx: draft graph %s: %w", dg.Name, err)
	}
	return b.g, b.enc, nil
}

func (b *builder) buildDraft(h *Eagle3Head) error {
	for _, t := range b.pg.Inputs {
		if t.DType != shard.Float32 {
			return fmt.Errorf("input %s: dtype %q, want float32", t.Name, t.DType)
		}
		b.g.Input(t.Name, Float, t.Shape...)
	}
	for _, n := range []string{shard.InputEmbeds, shard.DraftHiddenIn, shard.AttentionMask, shard.PositionIDsCos, shard.PositionIDsSin} {
		if b.pg.Input(n) == nil {
			return fmt.Errorf("no input %s", n)
		}
	}
	c := &b.c
	nh, nkv, d, ar := int64(c.Heads), int64(c.KVHeads), int64(c.HeadDim), b.ar
	b.ropeTables(shard.PositionIDsCos, shard.PositionIDsSin)
	g := shard.DraftHiddenIn
	gn := b.rmsNorm(g, "blk.0.attn_norm_2.weight")
	x := b.opAttr("Concat", []string{b.rmsNorm(shard.InputEmbeds, "blk.0.attn_norm.weight"), gn}, AttrInt("axis", 2))
	res := g
	if h.NormBeforeResidual {
		res = gn
	}
	qkv, err := b.linears(x, "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight")
	if err != nil {
		return err
	}
	o := b.attend(0, b.reshape(qkv[0], 1, ar, nh, d), b.reshape(qkv[1], 1, ar, nkv, d), b.reshape(qkv[2], 1, ar, nkv, d))
	out, err := b.linear(o, "blk.0.attn_output.weight")
	if err != nil {
		return err
	}
	b.x = b.op("Add", res, out)
	if err := b.ffn(0); err != nil {
		return err
	}
	b.g.Named(shard.LastHiddenStates, "Identity", []string{b.x})
	head, err := b.matrix("output.weight", "output.weight")
	if err != nil {
		return err
	}
	b.g.Named(shard.Logits, "MatMul", []string{b.rmsNorm(b.x, "output_norm.weight"), head})
	if b.err != nil {
		return b.err
	}
	for _, t := range b.pg.Outputs {
		if !b.g.names[t.Name] {
			return fmt.Errorf("output %s is not computed by the draft graph", t.Name)
		}
		b.g.Output(t.Name, Float, t.Shape...)
	}
	return b.activations()
}
