package runtime

import (
	"fmt"
	"math"
	"slices"

	"github.com/qnnprep/qnnprep/shard"
)

// Simulation is the device's quantization of a plan's graphs as their
// exported encodings declare it, for a Staged executor to apply
// (NewSimulated): every input and output tensor of a stage call that has
// an encoding is fake-quantized — each value x becomes
// (q + offset)·scale with q = clamp(round(x/scale) − offset, 0, 2^bw − 1)
// — when the call reads it and when it writes it. That covers what a
// context binary holds in integers between calls: hidden states passed
// from stage to stage, the KV entries Genie copies from _out to _in, the
// conv and recurrent state, the logits, the RoPE tables (the layers
// rotate by the quantized tables) and the attention mask. Values inside a
// stage stay float32, as the encodings say nothing about them; a tensor
// without an encoding stays float32 too. The weights are the model's:
// whoever builds a Simulation from exported encodings proves that their
// parameter encodings are the model's own (pipeline.SimulateEncodings).
type Simulation struct {
	plan   *shard.Plan
	graphs map[string]*graphQuant
	// Tensors is the number of tensors (over all graphs) quantized.
	Tensors int
}

// Encoding is one tensor's quantization (an AIMET activation encoding).
// Scale i covers the i-th run of elements in row-major order: runs of
// BlockSize elements when BlockSize > 0 (PER_BLOCK), else len(Scale)
// equal runs (one: PER_TENSOR; one per channel: PER_CHANNEL), the order
// parameter encodings list theirs in.
type Encoding struct {
	BW        int
	Scale     []float32
	Offset    []int64
	BlockSize int
}

// graphQuant is one graph's encodings by tensor.
type graphQuant struct {
	in, out  []tensorQuant
	cos, sin *fakeQuant // position_ids_cos/_sin, for the layers' RoPE
}

type tensorQuant struct {
	name string
	q    fakeQuant
}

// fakeQuant is one tensor's encoding with its run length.
type fakeQuant struct {
	e   Encoding
	per int // elements per scale
}

// apply fake-quantizes x in place.
func (q *fakeQuant) apply(x []float32) {
	top := int64(1)<<q.e.BW - 1
	for i, v := range x {
		j := i / q.per
		s, off := q.e.Scale[j], q.e.Offset[j]
		c := max(0, min(int64(math.Round(float64(v/s)))-off, top))
		x[i] = float32(c+off) * s
	}
}

// NewSimulation prepares the encodings of every graph of plan p (graph
// name → tensor name → encoding) for NewSimulated. Every graph needs an
// entry (empty: nothing quantized); each encoding must name a float input
// or output of its graph and fit its size.
func NewSimulation(p *shard.Plan, graphs map[string]map[string]Encoding) (*Simulation, error) {
	if p == nil {
		return nil, fmt.Errorf("runtime: simulation: nil plan")
	}
	sim := &Simulation{plan: p, graphs: map[string]*graphQuant{}}
	for gi := range p.Graphs {
		g := &p.Graphs[gi]
		encs, ok := graphs[g.Name]
		if !ok {
			return nil, fmt.Errorf("runtime: simulation: no encodings for graph %s", g.Name)
		}
		gq, err := newGraphQuant(g, encs)
		if err != nil {
			return nil, fmt.Errorf("runtime: simulation: graph %s: %w", g.Name, err)
		}
		sim.graphs[g.Name] = gq
		sim.Tensors += len(gq.in) + len(gq.out)
	}
	return sim, nil
}

func newGraphQuant(g *shard.Graph, encs map[string]Encoding) (*graphQuant, error) {
	gq := &graphQuant{}
	names := make([]string, 0, len(encs))
	for name := range encs {
		names = append(names, name)
	}
	slices.Sort(names) // the same error for the same input
	for _, name := range names {
		a := encs[name]
		t, isIn := g.Input(name), true
		if t == nil {
			t, isIn = g.Output(name), false
		}
		if t == nil {
			return nil, fmt.Errorf("encoding %q names no input or output of the graph (only stage inputs and outputs can be simulated)", name)
		}
		if t.DType != shard.Float32 {
			return nil, fmt.Errorf("encoding %q: tensor is %s, not float32", name, t.DType)
		}
		if a.BW < 1 || a.BW > 32 || len(a.Scale) == 0 || len(a.Scale) != len(a.Offset) {
			return nil, fmt.Errorf("encoding %q: bw %d with %d scales and %d offsets", name, a.BW, len(a.Scale), len(a.Offset))
		}
		n := 1
		for _, d := range t.Shape {
			n *= int(d)
		}
		q := fakeQuant{e: a}
		if a.BlockSize > 0 {
			if a.BlockSize*len(a.Scale) != n {
				return nil, fmt.Errorf("encoding %q: %d blocks of %d for %d elements", name, len(a.Scale), a.BlockSize, n)
			}
			q.per = a.BlockSize
		} else {
			if n%len(a.Scale) != 0 {
				return nil, fmt.Errorf("encoding %q: %d scales do not divide its %d elements", name, len(a.Scale), n)
			}
			q.per = n / len(a.Scale)
		}
		if isIn {
			gq.in = append(gq.in, tensorQuant{name, q})
		} else {
			gq.out = append(gq.out, tensorQuant{name, q})
		}
		if name == shard.PositionIDsCos || name == shard.PositionIDsSin {
			// The layers quantize one position's row at a time.
			if len(a.Scale) != 1 {
				return nil, fmt.Errorf("encoding %q: %d scales; the RoPE tables can be simulated per tensor only", name, len(a.Scale))
			}
			if name == shard.PositionIDsCos {
				gq.cos = &q
			} else {
				gq.sin = &q
			}
		}
	}
	return gq, nil
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
