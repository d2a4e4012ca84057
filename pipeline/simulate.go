package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

// Simulation thresholds: the default verdict on a simulation of the
// exported encodings against the float decode of the same qmodel, over
// all prompts together, in the spirit of verify's defaults: the mean logit
// cosine (over the float run's top-k ids) separates correct from broken,
// and top-1 agreement is a second line with room for near-ties. Measured
// on synthetic int8 qwen35 hybrids (8 prompts × 32 tokens): 16-bit
// encodings calibrated on text (minmax) keep cosine ≥ 0.99985 and top-1
// 0.92–0.965; the KV range ten times too narrow gives ≤ 0.9991 and
// 0.80–0.85; hidden-state, conv-state or logit ranges ten times too
// narrow ≤ 0.99 and ≤ 0.10. (The runtime rounds activations to Q8_0 blocks
// before each integer matmul, as llama.cpp does, which turns even a 16-bit
// step into an occasional flipped near-tie on these small random models.)
const (
	SimMinTop1   = 0.5
	SimMinCosine = 0.9995
)

// SimOptions control SimulateEncodings.
type SimOptions struct {
	Prompts []golden.Prompt // empty: DefaultPrompts
	Tokens  int             // greedy steps per prompt (0: 16)
	TopK    int             // float-run logits kept per step for the cosine (0: 16)
	Threads int
	// MinTop1 and MinCosine replace SimMinTop1 and SimMinCosine when set.
	MinTop1, MinCosine float64
}

// ReadGraphEncodings reads <graph>.encodings.json of every graph of p
// from dir (an export's output directory).
func ReadGraphEncodings(dir string, p *shard.Plan) (map[string]*onnx.Encodings, error) {
	out := map[string]*onnx.Encodings{}
	for _, g := range p.Graphs {
		e, err := onnx.ReadEncodings(filepath.Join(dir, g.Name+".encodings.json"))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no encodings for graph %s of plan %s (export the plan into it first)", dir, g.Name, p.Model.Name)
		}
		if err != nil {
			return nil, err
		}
		out[g.Name] = e
	}
	return out, nil
}

// SimulateEncodings decodes the prompts with model m twice: in float (the
// whole-model runtime, which the staged executor equals bit for bit) and
// through plan p's stages with the activations, KV entries, states and
// logits fake-quantized exactly as encs (by graph name) declare
// (runtime.Simulation). It returns the simulated decode's report against
// the float run: teacher-forced top-1 agreement, logit cosine, exact match
// and first divergence, judged by o.Criteria.
func SimulateEncodings(ctx context.Context, m *model.Model, p *shard.Plan, encs map[string]*onnx.Encodings, o SimOptions) (*golden.Report, error) {
	if err := p.Fits(m.Config); err != nil {
		return nil, fmt.Errorf("simulation: %w", err)
	}
	acts := map[string]map[string]runtime.Encoding{}
	params := map[string]bool{} // checked already
	for _, g := range p.Graphs {
		enc := encs[g.Name]
		if enc == nil {
			return nil, fmt.Errorf("simulation: no encodings for graph %s", g.Name)
		}
		for i := range enc.ParamEncodings {
			pe := &enc.ParamEncodings[i]
			if params[pe.Name] {
				continue
			}
			if err := checkParam(m, p.Container, pe); err != nil {
				return nil, fmt.Errorf("simulation: graph %s: %w", g.Name, err)
			}
			params[pe.Name] = true
		}
		a := map[string]runtime.Encoding{}
		for _, e := range enc.ActivationEncodings {
			a[e.Name] = runtime.Encoding{BW: e.BW, Scale: e.Scale, Offset: e.Offset, BlockSize: e.BlockSize}
		}
		acts[g.Name] = a
	}
	sim, err := runtime.NewSimulation(p, acts)
	if err != nil {
		return nil, err
	}
	prompts := o.Prompts
	if len(prompts) == 0 {
		prompts = DefaultPrompts(m.Config)
	}
	n, topK := cmpOr(o.Tokens, 16), cmpOr(o.TopK, 16)
	longest, cl := 0, 0
	for _, pr := range prompts {
		longest = max(longest, len(pr.IDs))
	}
	for _, v := range p.Variants {
		cl = max(cl, v.CL)
	}
	if longest+n-1 > cl {
		return nil, fmt.Errorf("simulation: prompts of %d tokens and %d steps exceed the plan's largest context (CL %d)", longest, n, cl)
	}
	ctxLen := max(cl, longest+n)
	e, err := runtime.New(m, runtime.Options{Threads: o.Threads, Context: ctxLen})
	if err != nil {
		return nil, err
	}
	f, err := golden.Record(ctx, e, prompts, n, min(topK, m.Config.VocabSize))
	if err != nil {
		return nil, fmt.Errorf("simulation: float run: %w", err)
	}
	st, err := runtime.NewSimulated(e, p, sim)
	if err != nil {
		return nil, err
	}
	// Judged over all prompts, not prompt by prompt: a 16-token prompt
	// loses 0.06 of top-1 to a single flipped near-tie.
	r, err := golden.Verify(ctx, st, f, golden.Criteria{})
	if err != nil {
		return nil, fmt.Errorf("simulation: %w", err)
	}
	crit := golden.Criteria{MinTop1: cmpOr(o.MinTop1, SimMinTop1), MinCosine: cmpOr(o.MinCosine, SimMinCosine)}
	crit.Basis = "over all prompts against the float run"
	if o.MinTop1 == 0 && o.MinCosine == 0 {
		crit.Basis = "simulation default, " + crit.Basis
	}
	r.Criteria = crit
	if sum := r.Summary; sum.Top1 < crit.MinTop1 {
		r.Failures = append(r.Failures, fmt.Sprintf("all prompts: teacher-forced top-1 agreement with the float run %.3f below %.3f", sum.Top1, crit.MinTop1))
	}
	if c := r.Summary.Cosine; c == nil || *c < crit.MinCosine {
		v := math.NaN()
		if c != nil {
			v = *c
		}
		r.Failures = append(r.Failures, fmt.Sprintf("all prompts: logit cosine with the float run %.5f below %.5f", v, crit.MinCosine))
	}
	r.Pass = len(r.Failures) == 0
	r.Decoder = fmt.Sprintf("simulated encodings (%d activation tensors, %d weights checked) vs float", sim.Tensors, len(params))
	return r, nil
}

// checkParam proves that parameter encoding pe is the encoding of m's
// tensor of that name (a tied head's "output.weight" is token_embd), so
// the weights the runtime multiplies by are the ones the encodings
// declare.
func checkParam(m *model.Model, c shard.Container, pe *onnx.Encoding) error {
	t := m.Tensor(pe.Name)
	if t == nil && pe.Name == "output.weight" {
		t = m.Tensor("token_embd.weight")
	}
	if t == nil {
		return fmt.Errorf("param encoding %q: the model has no such tensor", pe.Name)
	}
	want, err := onnx.ParamEncoding(t, c)
	t.Release()
	if err != nil {
		return err
	}
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
