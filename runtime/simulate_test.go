package runtime

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

func TestFakeQuant(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    onnx.Encoding
		per  int
		in   []float32
		want []float32
	}{
		{
			// 8-bit asymmetric over [−1, 3] in steps of 1/64: rounds to
			// the grid, clamps outside.
			name: "per tensor",
			e:    onnx.Encoding{EncType: onnx.PerTensor, BW: 8, Scale: onnx.Float32s{1.0 / 64}, Offset: []int64{-64}},
			per:  4,
			in:   []float32{0.01, -2, 5, 1.0 / 128 * 3},
			want: []float32{1.0 / 64, -1, float32(255-64) / 64, 2.0 / 64},
		},
		{
			name: "per channel",
			e:    onnx.Encoding{EncType: onnx.PerChannel, IsSym: true, BW: 4, Scale: onnx.Float32s{1, 0.5}, Offset: []int64{-8, -8}},
			per:  2,
			in:   []float32{1.4, 9, 1.4, 9},
			want: []float32{1, 7, 1.5, 3.5},
		},
		{
			name: "per block",
			e:    onnx.Encoding{EncType: onnx.PerBlock, IsSym: true, BW: 4, BlockSize: 1, Scale: onnx.Float32s{1, 0.25, 2}, Offset: []int64{-8, -8, -8}},
			per:  1,
			in:   []float32{-20, 0.3, 2.9},
			want: []float32{-8, 0.25, 2},
		},
	} {
		q := fakeQuant{e: &tc.e, per: tc.per}
		x := append([]float32(nil), tc.in...)
		q.apply(x)
		assert.Equal(t, tc.want, x, tc.name)
		// Idempotent: a quantized value quantizes to itself, so _in and
		// _out of one state may both be quantized.
		y := append([]float32(nil), x...)
		q.apply(y)
		assert.Equal(t, x, y, tc.name)
	}
}

// simModel quantizes a synthetic model of arch with the int8 recipe,
// plans it in two stages and exports it; it returns the qmodel, the plan
// and the encodings by graph.
func simModel(t *testing.T, arch model.Arch) (*model.Model, *shard.Plan, map[string]*onnx.Encodings) {
	t.Helper()
	src, err := synth.Model(synth.Config(arch, false), 4)
	require.NoError(t, err)
	dir := t.TempDir()
	out := filepath.Join(dir, "q.gguf")
	_, err = quantize.Run(context.Background(), src, out, quantize.Options{Recipe: quantize.Recipes["int8"], Workers: 1})
	require.NoError(t, err)
	qm, err := model.Open(out)
	require.NoError(t, err)
	t.Cleanup(func() { qm.Close() })
	p, err := shard.PlanModel(qm, shard.Options{Stages: 2, AR: []int{4, 1}, CL: []int{64}})
	require.NoError(t, err)
	ranges := map[string]onnx.Range{shard.Logits: {Min: -30, Max: 30}}
	for k := range p.Stages {
		ranges[shard.HiddenStates(k)] = onnx.Range{Min: -8, Max: 8}
	}
	for l, kind := range qm.Config.LayerKinds {
		if kind == model.Attention {
			ranges[fmt.Sprintf("past_key_%d", l)] = onnx.Range{Min: -6, Max: 6}
			ranges[fmt.Sprintf("past_value_%d", l)] = onnx.Range{Min: -6, Max: 6}
		}
	}
	paths, err := onnx.Export(qm, p, filepath.Join(dir, "onnx"), onnx.ExportOptions{Options: onnx.Options{Ranges: ranges}}, nil)
	require.NoError(t, err)
	encs := map[string]*onnx.Encodings{}
	for _, g := range p.Graphs {
		e, err := onnx.ReadEncodings(filepath.Join(dir, "onnx", g.Name+".encodings.json"))
		require.NoError(t, err)
		encs[g.Name] = e
	}
	require.NotEmpty(t, paths)
	return qm, p, encs
}

// floatLogits are the whole-model teacher-forced logits of prompt+cont.
func floatLogits(t *testing.T, e *Engine, prompt, cont []int32) [][]float32 {
	t.Helper()
	st := e.NewState()
	first, err := st.Forward(prompt)
	require.NoError(t, err)
	more, err := st.ForwardAll(cont[:len(cont)-1])
	require.NoError(t, err)
	return append([][]float32{first}, more...)
}

// TestSimulationWeightsOnly: with only the parameter encodings (the
// activations, KV and states left in float) the simulated staged decode
// gives the qmodel's own logits bit for bit — they are the same weights;
// with the activation encodings the logits move, but stay close.
func TestSimulationWeightsOnly(t *testing.T) {
	for _, arch := range []model.Arch{model.Qwen35, model.Llama} {
		t.Run(string(arch), func(t *testing.T) {
			qm, p, encs := simModel(t, arch)
			prompt, cont := []int32{1, 40, 300, 7}, []int32{9, 100, 250, 31, 77, 5, 400}
			e, err := New(qm, Options{Context: 64})
			require.NoError(t, err)
			want := floatLogits(t, e, prompt, cont)

			weights := map[string]*onnx.Encodings{}
			acts := 0
			for name, enc := range encs {
				c := *enc
				acts += len(c.ActivationEncodings)
				c.ActivationEncodings = nil
				weights[name] = &c
			}
			require.NotZero(t, acts, "the export declared no activation encodings")
			sim, err := NewSimulation(qm, p, weights)
			require.NoError(t, err)
			assert.NotZero(t, sim.Params)
			assert.Zero(t, sim.Activations)
			st, err := NewSimulated(e, p, sim)
			require.NoError(t, err)
			got, err := st.TeacherForced(context.Background(), prompt, cont)
			require.NoError(t, err)
			require.Len(t, got, len(want))
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("row %d logit %d: simulated %v, qmodel %v", i, j, got[i][j], want[i][j])
					}
				}
			}

			full, err := NewSimulation(qm, p, encs)
			require.NoError(t, err)
			assert.Equal(t, acts, full.Activations)
			st, err = NewSimulated(e, p, full)
			require.NoError(t, err)
			q, err := st.TeacherForced(context.Background(), prompt, cont)
			require.NoError(t, err)
			moved := false
			for i := range want {
				moved = moved || !equalBits(q[i], want[i])
				assert.Greater(t, cosine(q[i], want[i]), 0.999, "row %d", i)
			}
			assert.True(t, moved, "the activation encodings changed no logit")
		})
	}
}

func equalBits(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// TestSimulationRefuses: encodings that do not belong to the model or
// the plan are errors naming what is wrong.
func TestSimulationRefuses(t *testing.T) {
	qm, p, encs := simModel(t, model.Llama)
	g := p.Graphs[0].Name
	clone := func() map[string]*onnx.Encodings {
		out := map[string]*onnx.Encodings{}
		for k, v := range encs {
			c := *v
			c.ActivationEncodings = append([]onnx.Encoding(nil), v.ActivationEncodings...)
			c.ParamEncodings = append([]onnx.Encoding(nil), v.ParamEncodings...)
			out[k] = &c
		}
		return out
	}
	for _, tc := range []struct {
		name string
		edit func(m map[string]*onnx.Encodings)
		want string
	}{
		{"missing graph", func(m map[string]*onnx.Encodings) { delete(m, g) }, "no encodings for graph " + g},
		{"other weights", func(m map[string]*onnx.Encodings) {
			pe := &m[g].ParamEncodings[0]
			pe.Scale = append(onnx.Float32s(nil), pe.Scale...)
			pe.Scale[0] *= 2
		}, "scales or offsets differ"},
		{"unknown weight", func(m map[string]*onnx.Encodings) { m[g].ParamEncodings[0].Name = "blk.9.ffn_up.weight" }, `"blk.9.ffn_up.weight": the model has no such tensor`},
		{"inner activation", func(m map[string]*onnx.Encodings) { m[g].ActivationEncodings[0].Name = "attn_out_0" }, `"attn_out_0" names no input or output`},
		{"block size", func(m map[string]*onnx.Encodings) {
			a := &m[g].ActivationEncodings[0]
			a.EncType, a.BlockSize = onnx.PerBlock, 3
		}, "blocks of 3"},
	} {
		m := clone()
		tc.edit(m)
		_, err := NewSimulation(qm, p, m)
		if assert.Error(t, err, tc.name) {
			assert.Contains(t, err.Error(), tc.want, tc.name)
		}
	}
}
