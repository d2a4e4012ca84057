package sparse_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/sparse"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit/quantized"
)

// TestEffectiveSparsity quantizes variants and measures the zeros that
// survive: Q8_0 keeps every zero; Q1_0 keeps none of a 2:4 pattern (each
// weight is ±d) but keeps the tiles of block128, which are whole Q1_0
// blocks.
func TestEffectiveSparsity(t *testing.T) {
	m, err := synth.Model(synth.Config(model.Llama, true), 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pattern, recipe string
		s               float64
		check           func(structured, effective float64) bool
	}{
		{"2:4", "q8_0", 0, func(s, e float64) bool { return e >= s && e < s+0.01 }},
		{"2:4", "q1", 0, func(s, e float64) bool { return e == 0 }},
		{"block128", "q1", 0.5, func(s, e float64) bool { return e == s }},
		{"block32", "q1", 0.5, func(s, e float64) bool { return e < s }},
		{"block32", "f16", 0.5, func(s, e float64) bool { return e == s }},
	} {
		v := apply(t, m, sparse.Options{Pattern: mustPattern(t, tc.pattern), Sparsity: tc.s})
		q := quantized.Model(t, v.Model, tc.recipe)
		if err := v.Report.MeasureEffective(q); err != nil {
			t.Fatal(err)
		}
		for _, tr := range v.Report.Tensors {
			if (tr.Note != "") != (tc.recipe == "q1" && *tr.Effective < tr.Sparsity) {
				t.Errorf("%s %s: %s note %q", tc.pattern, tc.recipe, tr.Name, tr.Note)
			}
			if !tc.check(tr.Sparsity, *tr.Effective) {
				t.Errorf("%s %s: %s structured %.4f, effective %.4f", tc.pattern, tc.recipe, tr.Name, tr.Sparsity, *tr.Effective)
			}
		}
		t.Logf("%s %s: structured %.4f, effective %.4f", tc.pattern, tc.recipe, v.Report.Sparsity, v.Report.EffectiveSparsity())
	}
}

// TestPipeline runs sparse variants of a hybrid model through quantize,
// the runtime, the shard planner and the ONNX exporter, whose graphs must
// pass the ONNX checker: 2:4 (int8), zeroed channels with whole zero rows
// (int8 rows of scale 0, and Q1_0 blocks of d = 0), and the pruned model.
func TestPipeline(t *testing.T) {
	m := synthModel(t, model.Qwen35)
	v24 := apply(t, m, sparse.Options{Pattern: mustPattern(t, "2:4")})
	vch := apply(t, m, sparse.Options{Pattern: mustPattern(t, "channel"), Sparsity: 0.5})
	pruned, err := vch.Prune()
	if err != nil {
		t.Fatal(err)
	}
	m1, err := synth.Model(synth.Config(model.Qwen35, true), 9)
	if err != nil {
		t.Fatal(err)
	}
	vq1 := apply(t, m1, sparse.Options{Pattern: mustPattern(t, "neuron"), Sparsity: 0.5})
	for _, tc := range []struct {
		name, recipe string
		m            *model.Model
	}{{"2:4", "int8", v24.Model}, {"channel-zeroed", "int8", vch.Model}, {"channel-pruned", "int8", pruned}, {"neuron-q1", "q1", vq1.Model}} {
		name, vm := tc.name, tc.m
		q := quantized.Model(t, vm, tc.recipe)
		e, err := runtime.New(q, runtime.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		// verify: the quantized variant against a golden recorded from
		// the float32 variant.
		ef, err := runtime.New(vm, runtime.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		g, err := golden.Record(context.Background(), ef, []golden.Prompt{{IDs: []int32{1, 20, 30}}, {IDs: []int32{1, 7}}}, 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		r, err := golden.Verify(context.Background(), golden.EngineDecoder(e), g, golden.Criteria{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%s): top-1 %.3f, exact match %.3f, cosine %.5f", name, tc.recipe, r.Summary.Top1, r.Summary.MatchFraction, *r.Summary.Cosine)
		// 1-bit weights wreck a random synthetic model; int8 must stay close.
		if tc.recipe == "int8" && (r.Summary.Top1 < 0.75 || *r.Summary.Cosine < 0.99) {
			t.Errorf("%s: quantized variant strays from the float variant: %+v", name, r.Summary)
		}
		p, err := shard.PlanModel(q, shard.Options{Stages: 2, AR: []int{4}, CL: []int{16}})
		if err != nil {
			t.Fatalf("%s: plan: %v", name, err)
		}
		// The variants are decoded by qnnprep's staged runtime, which carries
		// Gated DeltaNet state between calls.
		if vs := shard.Check(p, shard.CheckEnv{StateRuntime: true}); len(vs) > 0 {
			t.Fatalf("%s: plan violations %v", name, vs)
		}
		paths, err := onnx.Export(q, p, t.TempDir(), onnx.ExportOptions{}, nil)
		if err != nil {
			t.Fatalf("%s: export: %v", name, err)
		}
		if peers.Check(peers.PythonONNX) != nil {
			t.Logf("%s: exported %d files; python3-onnx missing, checker skipped", name, len(paths))
			continue
		}
		for _, path := range paths {
			if filepath.Ext(path) == ".onnx" {
				if err := peers.ONNXCheck(path); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		}
	}
}
