//go:build cgo

package onnx

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit/ortpeer"
)

// runORT runs graph file with the inputs given by name and returns its
// outputs by name.
func runORT(t *testing.T, path string, g *shard.Graph, in map[string][]float32) map[string][]float32 {
	t.Helper()
	var names, outNames []string
	var inputs []ort.Value
	for _, x := range g.Inputs {
		names = append(names, x.Name)
		data, ok := in[x.Name]
		if !ok {
			t.Fatalf("%s: no value for input %s", g.Name, x.Name)
		}
		v, err := ort.NewTensor(ort.NewShape(x.Shape...), append([]float32(nil), data...))
		if err != nil {
			t.Fatalf("%s: %s: %v", g.Name, x.Name, err)
		}
		inputs = append(inputs, v)
	}
	for _, x := range g.Outputs {
		outNames = append(outNames, x.Name)
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer opts.Destroy()
	opts.SetIntraOpNumThreads(1)
	ss, err := ort.NewDynamicAdvancedSession(path, names, outNames, opts)
	if err != nil {
		t.Fatalf("%s: %v", g.Name, err)
	}
	defer ss.Destroy()
	outputs := make([]ort.Value, len(g.Outputs))
	if err := ss.Run(inputs, outputs); err != nil {
		t.Fatalf("%s: %v", g.Name, err)
	}
	out := map[string][]float32{}
	for i, x := range g.Outputs {
		out[x.Name] = append([]float32(nil), outputs[i].(*ort.Tensor[float32]).GetData()...)
		outputs[i].Destroy()
	}
	for _, v := range inputs {
		v.Destroy()
	}
	return out
}

// TestORTEaglet exports an eaglet plan with an EAGLE-3 head (taps at the
// embeddings, on the last stage's first layer and after its last layer)
// and runs the graphs with ONNX Runtime: each target stage, fed the
// surfaces the staged runtime fed it on an 8-token prompt, gives the
// runtime's outputs (the taps, hidden states, last_hidden_states = fc over
// the taps, logits and KV), and each draft graph, fed random embeddings,
// features and a cache with a tree-shaped mask, gives the runtime's draft
// graph outputs (1e-4 absolute, relative to the largest value).
func TestORTEaglet(t *testing.T) {
	ortpeer.Need(t)
	for _, arch := range []model.Arch{model.Llama, model.Qwen3} {
		t.Run(string(arch), func(t *testing.T) {
			m := tinyModel(t, synth.Config(arch, false), 5)
			dir := t.TempDir()
			p, e, head, _ := eagletExport(t, m, dir, false)
			hcfg := head.Config()
			// Target: one 8-token prompt call through the staged runtime.
			s, err := runtime.NewStaged(e, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetEagle3(head); err != nil {
				t.Fatal(err)
			}
			prompt := []int32{1, 17, 33, 4, 60, 8, 91, 12}
			if _, err := s.Forward(prompt); err != nil {
				t.Fatal(err)
			}
			for k := range p.Stages {
				g := p.Graph(k, 8, 64)
				in := map[string][]float32{}
				for _, x := range g.Inputs {
					in[x.Name] = s.Surface(8, 64, x.Name)
				}
				got := runORT(t, filepath.Join(dir, g.Name+".onnx"), g, in)
				for _, x := range g.Outputs {
					want := s.Surface(8, 64, x.Name)
					if d := relDiff(got[x.Name], want); d > 1e-4 {
						t.Errorf("%s: %s differs from the runtime by %.3g", g.Name, x.Name, d)
					}
				}
			}
			// Draft: random rows over a 5-entry cache, rows 1 and 2 children
			// of row 0, row 3 a child of the cache only.
			rng := rand.New(rand.NewPCG(3, 3))
			for _, dg := range p.Draft.Graphs {
				ar, cl := dg.AR, dg.CL
				past := cl - ar
				in := map[string][]float32{}
				for _, x := range dg.Inputs {
					n := int64(1)
					for _, d := range x.Shape {
						n *= d
					}
					v := make([]float32, n)
					for i := range v {
						v[i] = float32(rng.NormFloat64())
					}
					in[x.Name] = v
				}
				mask := in[shard.AttentionMask]
				parent := []int{-1, 0, 0, -1, 3, 4, 5, 6}
				for r := 0; r < ar; r++ {
					row := mask[r*cl : (r+1)*cl]
					for j := range row {
						row[j] = runtime.MaskedValue
					}
					for j := 0; j < 5; j++ {
						row[j] = 0
					}
					for a := r; a >= 0; a = parent[a] {
						row[past+a] = 0
					}
				}
				half := hcfg.HeadDim / 2
				cos, sin := in[shard.PositionIDsCos], in[shard.PositionIDsSin]
				for r := 0; r < ar; r++ {
					for i := 0; i < half; i++ {
						th := float64(5+r) * math.Pow(float64(hcfg.RopeTheta), -2*float64(i)/float64(hcfg.HeadDim))
						cos[r*half+i], sin[r*half+i] = float32(math.Cos(th)), float32(math.Sin(th))
					}
				}
				want, err := head.DraftGraph(p, dg.Name, in)
				if err != nil {
					t.Fatal(err)
				}
				got := runORT(t, filepath.Join(dir, dg.Name+".onnx"), &dg, in)
				for _, x := range dg.Outputs {
					if d := relDiff(got[x.Name], want[x.Name]); d > 1e-4 {
						t.Errorf("%s: %s differs from the runtime by %.3g", dg.Name, x.Name, d)
					}
				}
			}
		})
	}
}

// relDiff is the largest |a−b| relative to the largest |b| (at least 1).
func relDiff(a, b []float32) float64 {
	d, _ := maxAbsDiff(a, b)
	m := 1.0
	for _, v := range b {
		m = max(m, math.Abs(float64(v)))
	}
	return d / m
}
