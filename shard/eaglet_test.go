package shard

import (
	"slices"
	"strings"
	"testing"
)

// eagletDialog is Genie's example eaglet configuration
// (configs/llama3-3b/llama3-3b-eaglet-htp.json).
var eagletDialog = Dialog{Type: Eaglet, DraftLen: 6, NBranches: 8, MaxTargetTokens: 32}

// eagletHead is an EAGLE-3 head for llamaConfig: EAGLE-3's default taps
// (2, N/2, N−3) and a 32000-token draft vocabulary.
func eagletHead() *EagletHead {
	return &EagletHead{Hidden: 4096, FFN: 14336, Heads: 32, KVHeads: 8, HeadDim: 128, DraftVocab: 32000, ExtractLayers: [3]int{2, 16, 29}}
}

func eagletPlan(t *testing.T) *Plan {
	return mustPlan(t, llamaConfig(), uniform(32, 10*mib), 0, 0,
		Options{LayersPerStage: 8, AR: []int{128, 32}, CL: []int{4096}, Dialog: eagletDialog, EagletHead: eagletHead()})
}

// TestEagletSurfaces: stage 0 takes embeddings, the stages holding tapped
// layers hand them to the last stage, which outputs last_hidden_states one
// embedding row wide (fc's output); the draft graphs have Genie's eaglet
// draft surfaces; the plan passes Check and survives a round trip.
func TestEagletSurfaces(t *testing.T) {
	p := eagletPlan(t)
	g0, g1, g3 := p.Graph(0, 32, 4096), p.Graph(1, 32, 4096), p.Graph(3, 32, 4096)
	if got := tensorNames(g0.Inputs); got[0] != InputEmbeds || slices.Contains(got, InputIDs) {
		t.Errorf("stage 0 inputs %v, want %s first and no %s", got, InputEmbeds, InputIDs)
	}
	// Layer 2 is in stage 0 (layers 0–7), 16 in stage 2, 29 in stage 3 (the last).
	if got := tensorNames(g0.Outputs)[:2]; !slices.Equal(got, []string{HiddenStates(0), Eagle3Tap(2)}) {
		t.Errorf("stage 0 main outputs %v", got)
	}
	if g1.Output(Eagle3Tap(2)) != nil || g1.Input(Eagle3Tap(2)) != nil {
		t.Errorf("stage 1 carries a tap it neither computes nor uses")
	}
	if p.Graph(2, 32, 4096).Output(Eagle3Tap(16)) == nil {
		t.Errorf("stage 2 does not output %s", Eagle3Tap(16))
	}
	for _, l := range []int{2, 16} {
		if g3.Input(Eagle3Tap(l)) == nil {
			t.Errorf("last stage lacks input %s", Eagle3Tap(l))
		}
	}
	if g3.Input(Eagle3Tap(29)) != nil {
		t.Errorf("last stage takes its own tap as an input")
	}
	if o := g3.Output(LastHiddenStates); o == nil || !slices.Equal(o.Shape, []int64{1, 32, 4096}) {
		t.Errorf("last_hidden_states %v", o)
	}
	if p.Draft == nil || len(p.Draft.Graphs) != 2 {
		t.Fatalf("draft %+v, want 2 graphs", p.Draft)
	}
	d := p.Draft.Graphs[1]
	if d.Name != "llama_eagle3_ar32_cl4096_01_of_01" {
		t.Errorf("draft graph name %s", d.Name)
	}
	wantIn := []string{InputEmbeds, DraftHiddenIn, AttentionMask, PositionIDsCos, PositionIDsSin, "past_key_0_in", "past_value_0_in"}
	wantOut := []string{Logits, LastHiddenStates, "past_key_0_out", "past_value_0_out"}
	if !slices.Equal(tensorNames(d.Inputs), wantIn) || !slices.Equal(tensorNames(d.Outputs), wantOut) {
		t.Errorf("draft I/O %v → %v, want %v → %v", tensorNames(d.Inputs), tensorNames(d.Outputs), wantIn, wantOut)
	}
	if l := d.Output(Logits); !slices.Equal(l.Shape, []int64{1, 32, 32000}) {
		t.Errorf("draft logits %v", l.Shape)
	}
	if vs := Check(p, CheckEnv{}); len(vs) != 0 {
		t.Errorf("violations: %v", vs)
	}
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Decode(b, "plan.json")
	if err != nil {
		t.Fatal(err)
	}
	if q.Draft == nil || !slices.Equal(names(q.Draft.Graphs[0].Inputs), names(p.Draft.Graphs[0].Inputs)) || q.Draft.Head != p.Draft.Head {
		t.Errorf("draft lost in the round trip: %+v", q.Draft)
	}
}

// TestEagletRules: each broken eaglet surface is reported under its own
// rule, naming the tensor, with a fix.
func TestEagletRules(t *testing.T) {
	last := func(p *Plan) *Graph { return p.Graph(len(p.Stages)-1, 32, 4096) }
	tests := []struct {
		name   string
		opts   func(o *Options)
		mutate func(p *Plan)
		rule   string
		tensor string
		msg    string
	}{
		{"no draft", func(o *Options) { o.EagletHead = nil }, nil, RuleEagletDraft, "", "no draft graphs"},
		{"token input", nil, func(p *Plan) {
			g := p.Graph(0, 32, 4096)
			g.Inputs[0] = Tensor{Name: InputIDs, Shape: []int64{1, 32}, DType: Int32}
		}, RuleEagletEmbed, InputEmbeds, "Eaglet does Not Supported tokens"},
		{"no feature", nil, func(p *Plan) {
			g := last(p)
			g.Outputs = slices.DeleteFunc(g.Outputs, func(t Tensor) bool { return t.Name == LastHiddenStates })
		}, RuleEagletFeature, LastHiddenStates, "as wide as an embedding row"},
		{"lost tap", nil, func(p *Plan) { dropInput(p, graphIndex(p, last(p).Name), Eagle3Tap(16)) }, RuleEagletTaps, Eagle3Tap(16), "layer 16"},
		{"draft vocab", nil, func(p *Plan) { p.Draft.Graphs[1].Outputs[0].Shape = []int64{1, 32, 128256} }, RuleEagletVocab, Logits, "draft-n-vocab 32000"},
		{"draft hidden encoding", nil, func(p *Plan) { p.Draft.Graphs[0].Inputs[1].Encoding = "hidden_states" }, RuleEncoding, DraftHiddenIn, "unconverted"},
		{"draft AR", func(o *Options) {
			o.AR, o.Dialog = []int{4}, Dialog{Type: Eaglet, DraftLen: 6, NBranches: 8, MaxTargetTokens: 4}
		}, nil, RuleEagletDraftAR, "", "n-branches = 8"},
		{"draft CL", func(o *Options) { o.CL, o.AR = []int{256}, []int{32} }, func(p *Plan) {}, RuleEagletDraftCL, "", "(draft-len − 1) × n-branches = 40"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{LayersPerStage: 8, AR: []int{128, 32}, CL: []int{4096}, Dialog: eagletDialog, EagletHead: eagletHead()}
			if tt.opts != nil {
				tt.opts(&o)
			}
			p := mustPlan(t, llamaConfig(), uniform(32, 10*mib), 0, 0, o)
			if tt.mutate != nil {
				tt.mutate(p)
			}
			env := CheckEnv{}
			if tt.rule == RuleEagletDraftCL {
				env.ProbePromptTokens = 220
			}
			vs := Check(p, env)
			var got *Violation
			for i := range vs {
				if vs[i].Rule == tt.rule && (tt.tensor == "" || vs[i].Tensor == tt.tensor) {
					got = &vs[i]
				}
			}
			if got == nil {
				t.Fatalf("no %s on %q: %v", tt.rule, tt.tensor, vs)
			}
			if !strings.Contains(got.Message, tt.msg) || got.Fix == "" {
				t.Errorf("%v: message lacks %q or no fix", got, tt.msg)
			}
		})
	}
}

func tensorNames(ts []Tensor) []string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Name)
	}
	return n
}

func graphIndex(p *Plan, name string) int {
	for i := range p.Graphs {
		if p.Graphs[i].Name == name {
			return i
		}
	}
	return -1
}

// TestEagletHeadRefused: a head that cannot draft for the target is
// refused when the plan is made.
func TestEagletHeadRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(h *EagletHead, o *Options)
		want string
	}{
		{"dialog", func(h *EagletHead, o *Options) { o.Dialog = Dialog{Type: SPD, DraftLen: 4} }, "only in the eaglet dialog"},
		{"layers", func(h *EagletHead, o *Options) { h.ExtractLayers = [3]int{2, 16, 40} }, "extract layers"},
		{"order", func(h *EagletHead, o *Options) { h.ExtractLayers = [3]int{16, 2, 29} }, "ascending"},
		{"vocab", func(h *EagletHead, o *Options) { h.DraftVocab = 200000 }, "draft vocabulary"},
		{"heads", func(h *EagletHead, o *Options) { h.KVHeads = 5 }, "multiple"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := eagletHead()
			o := Options{LayersPerStage: 8, AR: []int{128, 32}, CL: []int{4096}, Dialog: eagletDialog, EagletHead: h}
			tt.mod(h, &o)
			_, err := NewPlan(llamaConfig(), Sizes{Layers: uniform(32, mib)}, "llama", o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want %q", err, tt.want)
			}
		})
	}
}

// TestEagletDraftEngine: the draft as a plan of its own passes the plan
// file's validation and round trip, with the draft graphs as its stage.
func TestEagletDraftEngine(t *testing.T) {
	p := eagletPlan(t)
	q, err := p.DraftEngine()
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Stages) != 1 || len(q.Graphs) != 2 || q.Model.Vocab != 32000 || q.Graphs[0].Name != p.Draft.Graphs[0].Name {
		t.Fatalf("draft engine plan %+v", q)
	}
	b, err := Encode(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b, "draft/plan.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := mustPlan(t, llamaConfig(), uniform(32, mib), 0, 0, Options{Dialog: eagletDialog}).DraftEngine(); err == nil {
		t.Error("a plan without a draft gave a draft engine")
	}
}
