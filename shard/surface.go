package shard

import (
	"fmt"
	"slices"

	"github.com/qnnprep/qnnprep/model"
)

// Tensor names Genie looks for (qnn-genie.md §1.2).
const (
	InputIDs         = "input_ids"
	AttentionMask    = "attention_mask"
	PositionIDsCos   = "position_ids_cos"
	PositionIDsSin   = "position_ids_sin"
	PositionIDs      = "position_ids"
	Logits           = "logits"
	LastHiddenStates = "last_hidden_states" // eaglet target output
)

// HiddenStates is the name of stage k's output, which is stage k+1's input.
func HiddenStates(k int) string { return fmt.Sprintf("hidden_states_%d", k) }

// State tensor names of layer l; dir is "in" or "out".
func PastKey(l int, dir string) string   { return fmt.Sprintf("past_key_%d_%s", l, dir) }
func PastValue(l int, dir string) string { return fmt.Sprintf("past_value_%d_%s", l, dir) }
func PastConv(l int, dir string) string  { return fmt.Sprintf("past_conv_%d_%s", l, dir) }
func PastSSM(l int, dir string) string   { return fmt.Sprintf("past_ssm_%d_%s", l, dir) }

const (
	Int32   = "int32"
	Float32 = "float32"
)

// buildGraph lays out the inputs and outputs of stage st for variant v,
// following DESIGN.md's table: shared inputs first, then per-layer state
// in layer order; outputs likewise.
func (p *Plan) buildGraph(c *model.Config, st *Stage, v Variant) Graph {
	g := Graph{
		Name:  GraphName(p.Model.Name, v.AR, v.CL, st.Index, p.StageCount()),
		Stage: st.Index,
		AR:    v.AR,
		CL:    v.CL,
	}
	ar, cl := int64(v.AR), int64(v.CL)
	past := cl - ar
	hidden := int64(c.Hidden)
	in := func(t Tensor) { g.Inputs = append(g.Inputs, t) }
	out := func(t Tensor) { g.Outputs = append(g.Outputs, t) }

	switch {
	case st.Embedding && p.Dialog.Type == Eaglet:
		in(Tensor{Name: InputEmbeds, Shape: []int64{1, ar, hidden}, DType: Float32, Layout: "batch,token,hidden", Encoding: InputEmbeds})
	case st.Embedding:
		in(Tensor{Name: InputIDs, Shape: []int64{1, ar}, DType: Int32, Layout: "batch,token"})
	default:
		name := HiddenStates(st.Index - 1)
		in(Tensor{Name: name, Shape: []int64{1, ar, hidden}, DType: Float32, Layout: "batch,token,hidden", Encoding: name})
	}
	// EAGLE-3 taps computed by earlier stages reach the last one.
	var taps []int
	if p.Draft != nil {
		taps = p.Draft.Head.Taps()
	}
	for _, l := range taps {
		if st.Head && p.TapStage(l) != st.Index {
			in(Tensor{Name: Eagle3Tap(l), Shape: []int64{1, ar, hidden}, DType: Float32, Layout: "batch,token,hidden", Encoding: Eagle3Tap(l)})
		}
	}
	attention := slices.Contains(c.LayerKinds[st.FirstLayer:st.LastLayer+1], model.Attention)
	if attention {
		in(Tensor{Name: AttentionMask, Shape: []int64{1, 1, ar, cl}, DType: Float32, Layout: "batch,1,query,key", Encoding: AttentionMask})
		switch p.Positional {
		case Rope:
			rd := int64(p.RopeDim)
			// Genie quantizes both tables with position_ids_cos's encoding.
			in(Tensor{Name: PositionIDsCos, Shape: []int64{1, 1, ar, rd}, DType: Float32, Layout: "batch,1,token,rope_dim", Encoding: PositionIDsCos})
			in(Tensor{Name: PositionIDsSin, Shape: []int64{1, 1, ar, rd}, DType: Float32, Layout: "batch,1,token,rope_dim", Encoding: PositionIDsCos})
		case Absolute:
			in(Tensor{Name: PositionIDs, Shape: []int64{1, 1, ar}, DType: Int32, Layout: "batch,1,token"})
		}
	}

	// AR-c graphs re-process all history, so they have no past inputs
	// (a CL−AR = 0 dimension is not a tensor); they still emit the new state.
	withPast := v.Mode == ModeKV
	nkv, hd := int64(c.KVHeads), int64(c.HeadDim)
	convTaps := int64(c.ConvKernel - 1)
	for l := st.FirstLayer; l <= st.LastLayer; l++ {
		switch c.LayerKinds[l] {
		case model.Attention:
			k, vv := fmt.Sprintf("past_key_%d", l), fmt.Sprintf("past_value_%d", l)
			if withPast {
				in(Tensor{Name: PastKey(l, "in"), Shape: []int64{nkv, 1, hd, past}, DType: Float32, Layout: "kv_head,batch,head_dim,position", Encoding: k})
				in(Tensor{Name: PastValue(l, "in"), Shape: []int64{nkv, 1, past, hd}, DType: Float32, Layout: "kv_head,batch,position,head_dim", Encoding: vv})
			}
			out(Tensor{Name: PastKey(l, "out"), Shape: []int64{nkv, 1, hd, ar}, DType: Float32, Layout: "kv_head,batch,head_dim,position", Encoding: k})
			out(Tensor{Name: PastValue(l, "out"), Shape: []int64{nkv, 1, ar, hd}, DType: Float32, Layout: "kv_head,batch,position,head_dim", Encoding: vv})
		case model.DeltaNet:
			cv := fmt.Sprintf("past_conv_%d", l)
			conv := []int64{int64(c.ConvDim()), convTaps}
			ssm := []int64{int64(c.SSMValueHeads), int64(c.SSMKeyDim), int64(c.SSMValueDim)}
			if withPast {
				in(Tensor{Name: PastConv(l, "in"), Shape: conv, DType: Float32, Layout: "channel,tap", Encoding: cv})
				in(Tensor{Name: PastSSM(l, "in"), Shape: slices.Clone(ssm), DType: Float32, Layout: "v_head,key_dim,value_dim"})
			}
			out(Tensor{Name: PastConv(l, "out"), Shape: slices.Clone(conv), DType: Float32, Layout: "channel,tap", Encoding: cv})
			out(Tensor{Name: PastSSM(l, "out"), Shape: ssm, DType: Float32, Layout: "v_head,key_dim,value_dim"})
		}
	}

	// The stage's main output goes first, before the state outputs.
	var main []Tensor
	if st.Head {
		main = append(main, Tensor{Name: Logits, Shape: []int64{1, ar, int64(c.VocabSize)}, DType: Float32, Layout: "batch,token,vocab", Encoding: Logits})
		if p.Dialog.Type == Eaglet {
			width := hidden
			if p.Draft != nil {
				width = int64(p.Draft.Head.Hidden) // fc(cat(taps))
			}
			main = append(main, Tensor{Name: LastHiddenStates, Shape: []int64{1, ar, width}, DType: Float32, Layout: "batch,token,hidden", Encoding: LastHiddenStates})
		}
	} else {
		name := HiddenStates(st.Index)
		main = append(main, Tensor{Name: name, Shape: []int64{1, ar, hidden}, DType: Float32, Layout: "batch,token,hidden", Encoding: name})
		for _, l := range taps {
			if p.TapStage(l) == st.Index {
				main = append(main, Tensor{Name: Eagle3Tap(l), Shape: []int64{1, ar, hidden}, DType: Float32, Layout: "batch,token,hidden", Encoding: Eagle3Tap(l)})
			}
		}
	}
	g.Outputs = append(main, g.Outputs...)
	return g
}

// StageCount is the number of stages.
func (p *Plan) StageCount() int { return len(p.Stages) }

// Graph returns stage's graph for variant (ar, cl), or nil.
func (p *Plan) Graph(stage, ar, cl int) *Graph {
	for i := range p.Graphs {
		if g := &p.Graphs[i]; g.Stage == stage && g.AR == ar && g.CL == cl {
			return g
		}
	}
	return nil
}

// Input returns the input named name, or nil.
func (g *Graph) Input(name string) *Tensor { return find(g.Inputs, name) }

// Output returns the output named name, or nil.
func (g *Graph) Output(name string) *Tensor { return find(g.Outputs, name) }
