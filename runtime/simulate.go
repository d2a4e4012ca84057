package runtime

import (
	"fmt"
	"slices"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/shard"
)

// Simulation is the device's quantization of a plan's graphs as their
// exported encodings declare it, for a Staged executor to apply
// (NewSimulated): every input and output tensor of a stage call that has
// an activation encoding is fake-quantized — each value x becomes
// (q + offset)·scale with q = clamp(round(x/scale) − offset, 0, 2^bw − 1)
// — when the call reads it and when it writes it. That covers what a
// context binary holds in integers between calls: hidden states passed
// from stage to stage, the KV entries Genie copies from _out to _in, the
// conv and recurrent state, the logits, the RoPE tables (the layers
// rotate by the quantized tables) and the attention mask. Values inside a
// stage stay float32, as the encodings say nothing about them; a tensor
// without an encoding stays float32 too.
//
// Parameter encodings are not applied but proven: each must be exactly
// the encoding of the model's tensor (onnx.ParamEncoding), whose codes
// and scales are the qmodel's, so the weights the runtime multiplies by
// are the ones the encodings declare.
//
// Scales of a PER_CHANNEL or PER_BLOCK activation encoding apply to the
// tensor's elements in row-major order: scale i to the i-th run of
// n/len(scale) (PER_CHANNEL) or block_size (PER_BLOCK) elements, the
// order param encodings list theirs in.
type Simulation struct {
	plan   *shard.Plan
	graphs map[string]*graphQuant
	// Params is the number of parameter encodings checked.
	Params int
	// Activations is the number of tensors (over all graphs) quantized.
	Activations int
}

// graphQuant is one graph's activation encodings by tensor name.
type graphQuant struct {
	in, out  []tensorQuant
	cos, sin *fakeQuant // position_ids_cos/_sin, for the layers' RoPE
}

type tensorQuant struct {
	name string
	q    fakeQuant
}

// fakeQuant is one tensor's encoding with its scale run length.
type fakeQuant struct {
	e   *onnx.Encoding
	per int // elements per scale
}

// apply fake-quantizes x in place.
func (q *fakeQuant) apply(x []float32) {
	for i, v := range x {
		j := i / q.per
		x[i] = float32(q.e.Code(v, j)) * q.e.Scale[j]
	}
}

// NewSimulation checks the encodings of every graph of plan p (by graph
// name, as written by onnx.Export) against p and model m and prepares
// them for NewSimulated. Every graph needs its encodings; an activation
// encoding must name a float input or output of its graph and fit its
// size; a parameter encoding must equal the one the model's tensor has in
// p's container.
func NewSimulation(m *model.Model, p *shard.Plan, encs map[string]*onnx.Encodings) (*Simulation, error) {
	if m == nil || p == nil {
		return nil, fmt.Errorf("runtime: simulation: nil model or plan")
	}
	if err := p.Fits(m.Config); err != nil {
		return nil, fmt.Errorf("runtime: simulation: %w", err)
	}
	sim := &Simulation{plan: p, graphs: map[string]*graphQuant{}}
	params := map[string]bool{} // checked already
	for gi := range p.Graphs {
		g := &p.Graphs[gi]
		enc := encs[g.Name]
		if enc == nil {
			return nil, fmt.Errorf("runtime: simulation: no encodings for graph %s", g.Name)
		}
		gq, err := newGraphQuant(g, enc)
		if err != nil {
			return nil, fmt.Errorf("runtime: simulation: graph %s: %w", g.Name, err)
		}
		sim.graphs[g.Name] = gq
		sim.Activations += len(gq.in) + len(gq.out)
		for i := range enc.ParamEncodings {
			pe := &enc.ParamEncodings[i]
			if params[pe.Name] {
				continue
			}
			if err := checkParam(m, p.Container, pe); err != nil {
				return nil, fmt.Errorf("runtime: simulation: graph %s: %w", g.Name, err)
			}
			params[pe.Name] = true
		}
	}
	sim.Params = len(params)
	return sim, nil
}

func newGraphQuant(g *shard.Graph, enc *onnx.Encodings) (*graphQuant, error) {
	gq := &graphQuant{}
	for i := range enc.ActivationEncodings {
		a := &enc.ActivationEncodings[i]
		t, isIn := g.Input(a.Name), true
		if t == nil {
			t, isIn = g.Output(a.Name), false
		}
		if t == nil {
			return nil, fmt.Errorf("activation encoding %q names no input or output of the graph (only stage inputs and outputs can be simulated)", a.Name)
		}
		if t.DType != shard.Float32 {
			return nil, fmt.Errorf("activation encoding %q: tensor is %s, not float32", a.Name, t.DType)
		}
		n := 1
		for _, d := range t.Shape {
			n *= int(d)
		}
		q := fakeQuant{e: a, per: n}
		switch a.EncType {
		case onnx.PerChannel:
			if n%len(a.Scale) != 0 {
				return nil, fmt.Errorf("activation encoding %q: %d channel scales do not divide its %d elements", a.Name, len(a.Scale), n)
			}
			q.per = n / len(a.Scale)
		case onnx.PerBlock:
			if a.BlockSize*len(a.Scale) != n {
				return nil, fmt.Errorf("activation encoding %q: %d blocks of %d for %d elements", a.Name, len(a.Scale), a.BlockSize, n)
			}
			q.per = a.BlockSize
		}
		if isIn {
			gq.in = append(gq.in, tensorQuant{a.Name, q})
		} else {
			gq.out = append(gq.out, tensorQuant{a.Name, q})
		}
		if a.Name == shard.PositionIDsCos || a.Name == shard.PositionIDsSin {
			// The layers quantize one position's row at a time.
			if a.EncType != onnx.PerTensor {
				return nil, fmt.Errorf("activation encoding %q: %s; the RoPE tables can be simulated per tensor only", a.Name, a.EncType)
			}
			if a.Name == shard.PositionIDsCos {
				gq.cos = &q
			} else {
				gq.sin = &q
			}
		}
	}
	return gq, nil
}

// checkParam proves that parameter encoding pe is the encoding of m's
// tensor of that name (a tied head's "output.weight" is token_embd).
func checkParam(m *model.Model, c shard.Container, pe *onnx.Encoding) error {
	t := m.Tensor(pe.Name)
	if t == nil && pe.Name == "output.weight" {
		t = m.Tensor("token_embd.weight")
	}
	if t == nil {
		return fmt.Errorf("param encoding %q: the model has no such tensor", pe.Name)
	}
	want, err := onnx.ParamEncoding(t, c)
	if err != nil {
		return err
	}
	t.Release()
	if want == nil {
		return fmt.Errorf("param encoding %q: the model holds it as %s, which has no integer codes", pe.Name, t.Type)
	}
	switch {
	case pe.EncType != want.EncType || pe.BW != want.BW || pe.IsSym != want.IsSym || pe.BlockSize != want.BlockSize:
		return fmt.Errorf("param encoding %q: %s %d-bit (block %d), the model's tensor is %s %d-bit (block %d)",
			pe.Name, pe.EncType, pe.BW, pe.BlockSize, want.EncType, want.BW, want.BlockSize)
	case !slices.Equal(pe.Scale, want.Scale) || !slices.Equal(pe.Offset, want.Offset):
		return fmt.Errorf("param encoding %q: scales or offsets differ from the model's tensor (encodings exported from another model?)", pe.Name)
	}
	return nil
}

// NewSimulated is NewStaged with sim's quantization applied to every
// stage call. sim must have been made for p.
func NewSimulated(e *Engine, p *shard.Plan, sim *Simulation) (*Staged, error) {
	if sim == nil || sim.plan != p {
		return nil, fmt.Errorf("runtime: simulation made for another plan")
	}
	s, err := NewStaged(e, p)
	if err != nil {
		return nil, err
	}
	s.sim = sim
	return s, nil
}

// runStage runs stage k of variant v, quantizing its inputs and outputs
// when simulating.
func (s *Staged) runStage(v *stagedVariant, k int) error {
	if s.sim == nil {
		return s.runGraph(v, k)
	}
	gq := s.sim.graphs[v.graphs[k].Name]
	for _, t := range gq.in {
		t.q.apply(v.f(t.name))
	}
	if gq.cos != nil || gq.sin != nil {
		s.st.ropeQ = gq.rope
	}
	err := s.runGraph(v, k)
	s.st.ropeQ = nil
	if err != nil {
		return err
	}
	for _, t := range gq.out {
		t.q.apply(v.f(t.name))
	}
	return nil
}

// rope quantizes one position's RoPE tables as the graph's position
// inputs are.
func (gq *graphQuant) rope(cos, sin []float32) {
	if gq.cos != nil {
		gq.cos.apply(cos)
	}
	if gq.sin != nil {
		gq.sin.apply(sin)
	}
}
