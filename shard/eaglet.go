package shard

import (
	"fmt"
	"slices"
)

// Genie's eaglet dialog (QAIRT 2.40 qualla dialogs/eaglet.{hpp,cpp} and
// engines/qnn-htp/nsp-model.{hpp,cpp}; shard/EAGLET.md in this
// repository) runs two engines. The target takes token embeddings (eaglet
// refuses token input; the dialog's embedding LUT turns tokens into rows)
// and outputs, beside logits, last_hidden_states: one feature row per
// token, which Genie copies into the draft's hidden_states input row by
// row, each row as many bytes as an embedding row. The draft takes the
// embeddings and hidden_states, and outputs logits over its own
// vocabulary (draft-n-vocab, mapped to target ids by draft-token-map) and
// its own last_hidden_states, the feature of the next tree level.
//
// An EAGLE-3 head reads three tapped target hidden states through fc
// (3·H_t → H_d) before its decoder layer. So that the feature row is one
// embedding row wide, qnnprep runs fc in the target's last stage:
// last_hidden_states = fc(cat(taps)). Stages holding a tapped layer hand
// its input on as eagle3_tap_L, which the last stage takes (Genie links
// same-named tensors of an engine into one buffer). The draft graph is
// then the rest of the head: its g is hidden_states (fc's output for
// accepted tokens, its own last_hidden_states for drafted ones), which is
// exactly EAGLE-3's first and later steps.

// Eaglet tensor names.
const (
	// InputEmbeds is the embedding input of eaglet target and draft
	// graphs, the name Genie's eaglet dialog reads the target's buffer by.
	InputEmbeds = "_model_embed_tokens_Gather_Gather_output_0"
	// DraftHiddenIn is the eaglet draft's feature input.
	DraftHiddenIn = "hidden_states"
)

// Eagle3Tap is the name of the target surface carrying the input of layer
// l (the residual stream after layers [0, l)) to the last stage.
func Eagle3Tap(l int) string { return fmt.Sprintf("eagle3_tap_%d", l) }

// EagletHead is the EAGLE-3 draft head an eaglet plan exports as the
// draft engine's graphs.
type EagletHead struct {
	Hidden     int `json:"hidden"`
	FFN        int `json:"ffn"`
	Heads      int `json:"heads"`
	KVHeads    int `json:"kv_heads"`
	HeadDim    int `json:"head_dim"`
	DraftVocab int `json:"draft_vocab"` // Genie's context.draft-n-vocab
	// ExtractLayers are the target layers whose inputs fc reads, ascending.
	ExtractLayers [3]int `json:"extract_layers"`
	// FCBytes is what the head's fc.weight, which the target's last stage
	// graph holds, weighs on the device in the plan's container; the last
	// stage's bytes count it. NewPlan takes 0 as float32.
	FCBytes int64 `json:"fc_bytes,omitempty"`
}

// DraftPlan is the eaglet draft engine: one single-stage graph per
// variant of the target plan.
type DraftPlan struct {
	Head    EagletHead `json:"head"`
	Name    string     `json:"name"`     // graph-name prefix
	RopeDim int        `json:"rope_dim"` // Genie rope-dim of the draft engine (0 for absolute positions)
	Graphs  []Graph    `json:"graphs"`
}

// Taps lists the distinct extract layers, ascending.
func (h *EagletHead) Taps() []int {
	t := slices.Clone(h.ExtractLayers[:])
	return slices.Compact(t)
}

// validate checks the head against the target model.
func (h *EagletHead) validate(m *ModelInfo) error {
	for _, f := range []struct {
		key string
		v   int
	}{{"hidden", h.Hidden}, {"ffn", h.FFN}, {"heads", h.Heads}, {"kv_heads", h.KVHeads}, {"head_dim", h.HeadDim}, {"draft_vocab", h.DraftVocab}} {
		if f.v <= 0 || f.v > maxModelDim {
			return fmt.Errorf("eaglet head: %s %d, want 1…%d", f.key, f.v, maxModelDim)
		}
	}
	if h.Heads%h.KVHeads != 0 || h.HeadDim%2 != 0 {
		return fmt.Errorf("eaglet head: %d heads over %d kv heads of dim %d: want a multiple and an even dim", h.Heads, h.KVHeads, h.HeadDim)
	}
	if h.DraftVocab > m.Vocab {
		return fmt.Errorf("eaglet head: draft vocabulary %d larger than the target's %d", h.DraftVocab, m.Vocab)
	}
	for i, l := range h.ExtractLayers {
		if l < 0 || l > m.Layers || (i > 0 && l < h.ExtractLayers[i-1]) {
			return fmt.Errorf("eaglet head: extract layers %v: want ascending layers within 0…%d", h.ExtractLayers, m.Layers)
		}
	}
	return nil
}

// TapStage is the stage whose graph has layer l's input: the stage
// holding layer l, or the last stage for l == layers.
func (p *Plan) TapStage(l int) int {
	for _, s := range p.Stages {
		if l >= s.FirstLayer && l <= s.LastLayer {
			return s.Index
		}
	}
	return len(p.Stages) - 1
}

// DraftGraphName is the eaglet draft graph of a variant.
func DraftGraphName(prefix string, ar, cl int) string {
	return GraphName(prefix, ar, cl, 0, 1)
}

// buildDraft lays out the draft engine's graphs, one per target variant.
func (p *Plan) buildDraft(h EagletHead) {
	d := &DraftPlan{Head: h, Name: p.Model.Name + "_eagle3"}
	if p.Positional == Rope {
		d.RopeDim = h.HeadDim / 2
	}
	for _, v := range p.Variants {
		d.Graphs = append(d.Graphs, d.graph(p.Positional, v))
	}
	p.Draft = d
}

func (d *DraftPlan) graph(pos Positional, v Variant) Graph {
	h := &d.Head
	ar, cl := int64(v.AR), int64(v.CL)
	hid := int64(h.Hidden)
	g := Graph{Name: DraftGraphName(d.Name, v.AR, v.CL), AR: v.AR, CL: v.CL}
	g.Inputs = []Tensor{
		{Name: InputEmbeds, Shape: []int64{1, ar, hid}, DType: Float32, Layout: "batch,token,hidden", Encoding: InputEmbeds},
		{Name: DraftHiddenIn, Shape: []int64{1, ar, hid}, DType: Float32, Layout: "batch,token,hidden", Encoding: LastHiddenStates},
		{Name: AttentionMask, Shape: []int64{1, 1, ar, cl}, DType: Float32, Layout: "batch,1,query,key", Encoding: AttentionMask},
	}
	if pos == Rope {
		rd := int64(d.RopeDim)
		g.Inputs = append(g.Inputs,
			Tensor{Name: PositionIDsCos, Shape: []int64{1, 1, ar, rd}, DType: Float32, Layout: "batch,1,token,rope_dim", Encoding: PositionIDsCos},
			Tensor{Name: PositionIDsSin, Shape: []int64{1, 1, ar, rd}, DType: Float32, Layout: "batch,1,token,rope_dim", Encoding: PositionIDsCos})
	} else {
		g.Inputs = append(g.Inputs, Tensor{Name: PositionIDs, Shape: []int64{1, 1, ar}, DType: Int32, Layout: "batch,1,token"})
	}
	nkv, hd := int64(h.KVHeads), int64(h.HeadDim)
	if v.Mode == ModeKV {
		g.Inputs = append(g.Inputs,
			Tensor{Name: PastKey(0, "in"), Shape: []int64{nkv, 1, hd, cl - ar}, DType: Float32, Layout: "kv_head,batch,head_dim,position", Encoding: "past_key_0"},
			Tensor{Name: PastValue(0, "in"), Shape: []int64{nkv, 1, cl - ar, hd}, DType: Float32, Layout: "kv_head,batch,position,head_dim", Encoding: "past_value_0"})
	}
	g.Outputs = []Tensor{
		{Name: Logits, Shape: []int64{1, ar, int64(h.DraftVocab)}, DType: Float32, Layout: "batch,token,vocab", Encoding: Logits},
		{Name: LastHiddenStates, Shape: []int64{1, ar, hid}, DType: Float32, Layout: "batch,token,hidden", Encoding: LastHiddenStates},
		{Name: PastKey(0, "out"), Shape: []int64{nkv, 1, hd, ar}, DType: Float32, Layout: "kv_head,batch,head_dim,position", Encoding: "past_key_0"},
		{Name: PastValue(0, "out"), Shape: []int64{nkv, 1, ar, hd}, DType: Float32, Layout: "kv_head,batch,position,head_dim", Encoding: "past_value_0"},
	}
	return g
}

// validateDraft checks a plan file's draft against its target.
func (p *Plan) validateDraft() error {
	d := p.Draft
	if d == nil {
		return nil
	}
	if p.Dialog.Type != Eaglet {
		return fmt.Errorf("draft graphs in a %s plan; only eaglet plans have them", p.Dialog.Type)
	}
	if err := d.Head.validate(&p.Model); err != nil {
		return err
	}
	if d.Head.FCBytes <= 0 {
		return fmt.Errorf("eaglet head: fc_bytes %d: the last stage's bytes do not count the head's fc (a plan of an older qnnprep?); plan again", d.Head.FCBytes)
	}
	if err := CheckName("draft name", d.Name); err != nil {
		return err
	}
	if d.RopeDim < 0 || d.RopeDim > maxModelDim {
		return fmt.Errorf("draft rope_dim %d: want 0…%d", d.RopeDim, maxModelDim)
	}
	if len(d.Graphs) != len(p.Variants) {
		return fmt.Errorf("%d draft graphs, want one per variant (%d)", len(d.Graphs), len(p.Variants))
	}
	for i, g := range d.Graphs {
		if err := CheckName("draft graph", g.Name); err != nil {
			return err
		}
		if g.AR != p.Variants[i].AR || g.CL != p.Variants[i].CL || g.Stage != 0 {
			return fmt.Errorf("draft graph %s: stage %d, AR %d, CL %d, want stage 0 of variant AR %d, CL %d", g.Name, g.Stage, g.AR, g.CL, p.Variants[i].AR, p.Variants[i].CL)
		}
		if err := g.validShapes(); err != nil {
			return fmt.Errorf("draft %w", err)
		}
	}
	return nil
}

// Eaglet rule ids.
const (
	RuleEagletEmbed   = "GENIE-EAGLET-EMBED"    // eaglet target or draft takes token ids
	RuleEagletFeature = "GENIE-EAGLET-FEATURE"  // last_hidden_states / hidden_states missing or not one embedding row wide
	RuleEagletTaps    = "GENIE-EAGLET-TAPS"     // a head extract layer does not reach the last stage
	RuleEagletDraft   = "GENIE-EAGLET-DRAFT"    // no draft graphs, or one lacks a surface
	RuleEagletDraftAR = "GENIE-EAGLET-DRAFT-AR" // no draft graph holds a tree level or the accepted tokens
	RuleEagletDraftCL = "GENIE-EAGLET-DRAFT-CL" // the draft context cannot hold the committed tokens and a whole tree
	RuleEagletVocab   = "GENIE-EAGLET-VOCAB"    // draft logits are not draft-n-vocab wide, or wider than the target's
)

// EagletDraftLevelTokens is the most tokens the draft processes in one
// tree level (markEligibleSequences keeps at most n-branches sequences),
// and EagletAcceptTokens the most it processes after a verification: the
// accepted tokens and the target's bonus token.
func (d *Dialog) EagletDraftLevelTokens() int { return d.NBranches }
func (d *Dialog) EagletAcceptTokens() int     { return d.DraftLen + 1 }

func (c *checker) eagletRules() {
	p := c.p
	d := &p.Dialog
	if d.Type != Eaglet {
		if p.Draft != nil {
			c.add(RuleEagletDraft, "", "", "drop the draft graphs or plan with --dialog eaglet", "the plan has draft graphs but its dialog is %s", d.Type)
		}
		return
	}
	h := int64(p.Model.Hidden)
	last := len(p.Stages) - 1
	for _, g := range p.Graphs {
		ar := int64(g.AR)
		if g.Stage == 0 {
			if g.Input(InputIDs) != nil || g.Input(InputEmbeds) == nil {
				c.add(RuleEagletEmbed, g.Name, InputEmbeds, fmt.Sprintf("feed embeddings: input %s [1, AR, hidden] and an embedding LUT in the Genie config", InputEmbeds),
					"eaglet runs the target on embeddings only (Genie: \"Eaglet does Not Supported tokens as input for now\") and reads the target's %s buffer for the accepted tokens' rows", InputEmbeds)
			} else if t := g.Input(InputEmbeds); !tail(t.Shape, ar, h) {
				c.add(RuleShape, g.Name, InputEmbeds, fmt.Sprintf("make %s [1, AR, hidden]", InputEmbeds), "shape %v, want [1, %d, %d]", t.Shape, ar, h)
			}
		}
		if g.Stage != last {
			continue
		}
		width := h
		if p.Draft != nil {
			width = int64(p.Draft.Head.Hidden)
		}
		if t := g.Output(LastHiddenStates); t == nil || !tail(t.Shape, ar, width) {
			got := "no such output"
			if t != nil {
				got = fmt.Sprintf("shape %v", t.Shape)
			}
			c.add(RuleEagletFeature, g.Name, LastHiddenStates, fmt.Sprintf("output %s [1, AR, %d] from the last stage", LastHiddenStates, width),
				"%s, want [1, %d, %d]: Genie copies one feature row per token from the target's %s into the draft's %s, each as wide as an embedding row", got, ar, width, LastHiddenStates, DraftHiddenIn)
		}
		if p.Draft != nil {
			for _, l := range p.Draft.Head.Taps() {
				if c.p.TapStage(l) == last {
					continue
				}
				if g.Input(Eagle3Tap(l)) == nil {
					c.add(RuleEagletTaps, g.Name, Eagle3Tap(l), fmt.Sprintf("give the last stage input %s from stage %d", Eagle3Tap(l), c.p.TapStage(l)+1),
						"the EAGLE-3 head reads the input of layer %d, which stage %d computes, but the last stage does not take it", l, c.p.TapStage(l)+1)
				}
			}
		}
	}
	dp := p.Draft
	if dp == nil {
		c.add(RuleEagletDraft, "", "", "build with --eagle3 HEAD (an EAGLE-3 head in llama.cpp's eagle3 GGUF layout or as released on Hugging Face)",
			"eaglet needs a draft engine, but the plan has no draft graphs")
		return
	}
	hd := int64(dp.Head.Hidden)
	if hd != h {
		c.add(RuleEagletFeature, "", "", "use a head whose hidden size is the target's",
			"the head's hidden size %d differs from the target's %d: Genie feeds the draft the target's embedding rows and copies feature rows of the embedding row's size", hd, h)
	}
	if dp.Head.DraftVocab > p.Model.Vocab {
		c.add(RuleEagletVocab, "", "", "use a head made for this target", "draft vocabulary %d is larger than the target's %d", dp.Head.DraftVocab, p.Model.Vocab)
	}
	maxAR, maxCL := 0, 0
	for _, g := range dp.Graphs {
		ar, cl := DetectARCL(&g)
		maxAR, maxCL = max(maxAR, ar), max(maxCL, cl)
		if ar != g.AR || cl != g.CL {
			c.add(RuleDetect, g.Name, "", "give the draft graph an attention_mask [1,1,AR,CL] and keep \"ar<AR>_cl<CL>\" in its name",
				"planned AR %d, CL %d but Genie detects AR %d, CL %d from this graph's I/O and name", g.AR, g.CL, ar, cl)
		}
		a := int64(g.AR)
		for _, n := range []struct {
			name  string
			input bool
			shape []int64
			rule  string
		}{
			{InputEmbeds, true, []int64{1, a, h}, RuleEagletEmbed},
			{DraftHiddenIn, true, []int64{1, a, hd}, RuleEagletFeature},
			{AttentionMask, true, []int64{1, 1, a, int64(g.CL)}, RuleEagletDraft},
			{LastHiddenStates, false, []int64{1, a, hd}, RuleEagletFeature},
			{Logits, false, []int64{1, a, int64(dp.Head.DraftVocab)}, RuleEagletVocab},
		} {
			ts := g.Outputs
			if n.input {
				ts = g.Inputs
			}
			t := find(ts, n.name)
			if t == nil || !slices.Equal(rank4(t.Shape), rank4(n.shape)) {
				got := "missing"
				if t != nil {
					got = fmt.Sprintf("shape %v", t.Shape)
				}
				c.add(n.rule, g.Name, n.name, fmt.Sprintf("make %s %v", n.name, n.shape), "draft graph %s: %s, want %v (draft-n-vocab %d)", n.name, got, n.shape, dp.Head.DraftVocab)
			}
		}
		for _, io := range []struct {
			name string
			enc  string
		}{{DraftHiddenIn, LastHiddenStates}} {
			if t := g.Input(io.name); t != nil && t.Encoding != io.enc {
				c.add(RuleEncoding, g.Name, io.name, "give hidden_states the encoding of last_hidden_states",
					"encoding %q, but Genie copies the bytes of the target's and the draft's %s into it unconverted", t.Encoding, io.enc)
			}
		}
	}
	need := max(d.EagletDraftLevelTokens(), d.EagletAcceptTokens())
	if maxAR < need {
		c.add(RuleEagletDraftAR, "", "", fmt.Sprintf("add a variant with AR ≥ %d (e.g. --ar %d plus the prompt AR)", need, nextPow2(need)),
			"the draft processes up to n-branches = %d tokens per tree level and draft-len + 1 = %d after each verification, each in one call (its attention map is built for one call), but its largest AR is %d",
			d.NBranches, d.DraftLen+1, maxAR)
	}
	// The draft's cache holds the committed tokens (one fewer than the
	// target's: draft row p pairs position p with token p+1) plus every
	// level drafted in a step until the next verification resets it.
	drafted := (d.DraftLen - 1) * d.NBranches
	if need := c.env.ProbePromptTokens + drafted + d.EagletAcceptTokens(); maxCL < need {
		c.add(RuleEagletDraftCL, "", "", fmt.Sprintf("use a CL of at least %d", need),
			"the draft cache holds the %d committed tokens plus (draft-len − 1) × n-branches = %d drafted ones within a step, and a call of up to %d tokens, %d in all, but the largest draft CL is %d",
			c.env.ProbePromptTokens, drafted, d.EagletAcceptTokens(), need, maxCL)
	}
}

// DraftEngine is the eaglet draft as a plan of its own: one stage whose
// graphs are p.Draft.Graphs, over the target's variants, so the SDK jobs,
// the bundle and Genie's draft engine treat it like any plan. The model
// summary is the head's (vocabulary: the draft vocabulary).
func (p *Plan) DraftEngine() (*Plan, error) {
	d := p.Draft
	if d == nil {
		return nil, fmt.Errorf("shard: plan %s has no eaglet draft", p.Model.Name)
	}
	h := d.Head
	q := &Plan{
		Version: Version,
		Model: ModelInfo{Name: d.Name, Arch: "eagle3", Layers: 1, Hidden: h.Hidden, FFN: h.FFN, Vocab: h.DraftVocab,
			Heads: h.Heads, KVHeads: h.KVHeads, HeadDim: h.HeadDim, RotaryDim: h.HeadDim, ContextLength: p.Model.ContextLength,
			LayerKinds: []string{"attention"}},
		Split: "stages", MaxStageBytes: p.MaxStageBytes, Container: p.Container, Positional: p.Positional,
		RopeDim: d.RopeDim, VTCMMB: p.VTCMMB, ContextSize: p.ContextSize,
		Dialog:   DialogPlan{Dialog: Dialog{Type: Basic}, StepTokens: 1, ProbePromptTokens: 1},
		Variants: slices.Clone(p.Variants),
		Graphs:   slices.Clone(d.Graphs),
	}
	st := Stage{Index: 0, FirstLayer: 0, LastLayer: 0, Head: true}
	for _, g := range d.Graphs {
		st.Graphs = append(st.Graphs, g.Name)
	}
	q.Stages = []Stage{st}
	q.fillSteps()
	if err := q.validate(); err != nil {
		return nil, fmt.Errorf("shard: eaglet draft of %s: %w", p.Model.Name, err)
	}
	return q, nil
}
