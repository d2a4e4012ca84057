//go:build cgo

// ONNX Runtime is loaded through cgo (github.com/yalue/onnxruntime_go).

package sparse_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/sparse"
	"github.com/qnnprep/qnnprep/testkit/ortpeer"
)

// ortLogits exports m's two-stage plan for one AR = len(tokens) call at
// CL = 2·AR and runs it with ONNX Runtime from an empty state: every past
// slot masked, RoPE positions 0…AR−1, zero conv and recurrent state.
func ortLogits(t *testing.T, m *model.Model, tokens []int32) [][]float32 {
	t.Helper()
	c := &m.Config
	ar, cl := len(tokens), 2*len(tokens)
	p, err := shard.PlanModel(m, shard.Options{Stages: 2, AR: []int{ar}, CL: []int{cl}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := onnx.Export(m, p, dir, onnx.ExportOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	// Rotation angles as ggml's rope cache builds them (DESIGN.md surfaces:
	// position_ids_cos/_sin are [1, 1, AR, rope_dim/2]).
	h := c.RopeDim / 2
	scale := float32(math.Pow(float64(float32(c.RopeTheta)), float64(float32(-2)/float32(c.RopeDim))))
	var cos, sin []float32
	for i := 0; i < ar; i++ {
		theta := float32(i)
		for j := 0; j < h; j++ {
			cos = append(cos, float32(math.Cos(float64(theta))))
			sin = append(sin, float32(math.Sin(float64(theta))))
			theta *= scale
		}
	}
	past := cl - ar
	mask := make([]float32, ar*cl)
	for i := 0; i < ar; i++ {
		for j := 0; j < cl; j++ {
			if j < past || j-past > i {
				mask[i*cl+j] = -1e4
			}
		}
	}
	var hidden []float32
	for st := range p.Stages {
		g := p.Graph(st, ar, cl)
		var names, outNames []string
		var inputs []ort.Value
		for _, in := range g.Inputs {
			names = append(names, in.Name)
			var v ort.Value
			switch in.Name {
			case shard.InputIDs:
				v, err = ort.NewTensor(ort.NewShape(in.Shape...), append([]int32(nil), tokens...))
			default:
				var data []float32
				switch in.Name {
				case shard.AttentionMask:
					data = mask
				case shard.PositionIDsCos:
					data = cos
				case shard.PositionIDsSin:
					data = sin
				case shard.HiddenStates(st - 1):
					data = hidden
				default: // past KV, conv and recurrent state: empty
					n := int64(1)
					for _, x := range in.Shape {
						n *= x
					}
					data = make([]float32, n)
				}
				v, err = ort.NewTensor(ort.NewShape(in.Shape...), append([]float32(nil), data...))
			}
			if err != nil {
				t.Fatalf("%s: %v", in.Name, err)
			}
			inputs = append(inputs, v)
		}
		for _, o := range g.Outputs {
			outNames = append(outNames, o.Name)
		}
		s, err := ort.NewDynamicAdvancedSession(filepath.Join(dir, g.Name+".onnx"), names, outNames, nil)
		if err != nil {
			t.Fatal(err)
		}
		outputs := make([]ort.Value, len(outNames))
		if err := s.Run(inputs, outputs); err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		hidden = append([]float32(nil), outputs[0].(*ort.Tensor[float32]).GetData()...)
		for _, v := range append(inputs, outputs...) {
			v.Destroy()
		}
		s.Destroy()
	}
	v := c.VocabSize
	rows := make([][]float32, ar)
	for i := range rows {
		rows[i] = hidden[i*v : (i+1)*v]
	}
	return rows
}

// TestORTParity: the exported ONNX of sparse variants (a 2:4 variant, a
// zeroed-channel variant and its pruned model of stories260K, and a
// zeroed-neuron qwen35) gives the runtime's logits under ONNX Runtime.
func TestORTParity(t *testing.T) {
	ortpeer.Need(t)
	st := openStories(t)
	q35 := synthModel(t, model.Qwen35)
	ch := apply(t, st, sparse.Options{Pattern: mustPattern(t, "channel"), Sparsity: 0.25})
	pruned, err := ch.Prune()
	if err != nil {
		t.Fatal(err)
	}
	tokens := []int32{1, 403, 407, 261, 378, 432, 383, 286}
	for _, tc := range []struct {
		name string
		m    *model.Model
	}{
		{"stories 2:4", apply(t, st, sparse.Options{Pattern: mustPattern(t, "2:4")}).Model},
		{"stories channel zeroed", ch.Model},
		{"stories channel pruned", pruned},
		{"qwen35 neuron zeroed", apply(t, q35, sparse.Options{Pattern: mustPattern(t, "neuron"), Sparsity: 0.5}).Model},
	} {
		e, err := runtime.New(tc.m, runtime.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		want, err := e.Logits(context.Background(), tokens)
		if err != nil {
			t.Fatal(err)
		}
		got := ortLogits(t, tc.m, tokens)
		if d := relDiff(want, got); d > 1e-4 {
			t.Errorf("%s: ORT vs runtime: max |Δlogit| %.3g (%.3g of the largest)", tc.name, maxDiff(want, got), d)
		}
		for i := range want {
			if runtime.Argmax(want[i]) != runtime.Argmax(got[i]) {
				t.Errorf("%s: position %d: argmax %d vs %d", tc.name, i, runtime.Argmax(want[i]), runtime.Argmax(got[i]))
			}
		}
	}
}
