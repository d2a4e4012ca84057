package runtime

import (
	"context"
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit/quantized"
)

func TestFakeQuant(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Encoding
		per  int
		in   []float32
		want []float32
	}{
		{
			// 8-bit asymmetric over [−1, 3] in steps of 1/64: rounds to
			// the grid, clamps outside.
			name: "per tensor",
			e:    Encoding{BW: 8, Scale: []float32{1.0 / 64}, Offset: []int64{-64}},
			per:  4,
			in:   []float32{0.01, -2, 5, 1.0 / 128 * 3},
			want: []float32{1.0 / 64, -1, float32(255-64) / 64, 2.0 / 64},
		},
		{
			name: "per channel",
			e:    Encoding{BW: 4, Scale: []float32{1, 0.5}, Offset: []int64{-8, -8}},
			per:  2,
			in:   []float32{1.4, 9, 1.4, 9},
			want: []float32{1, 7, 1.5, 3.5},
		},
		{
			name: "per block",
			e:    Encoding{BW: 4, BlockSize: 1, Scale: []float32{1, 0.25, 2}, Offset: []int64{-8, -8, -8}},
			per:  1,
			in:   []float32{-20, 0.3, 2.9},
			want: []float32{-8, 0.25, 2},
		},
	} {
		q := fakeQuant{e: tc.e, per: tc.per}
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

// simModel quantizes a synthetic model of arch with the int8 recipe and
// plans it in two stages; it returns the qmodel, the plan and 16-bit
// encodings (AIMET's asymmetric form) for the hidden states, KV entries
// and logits of every graph.
func simModel(t *testing.T, arch model.Arch) (*model.Model, *shard.Plan, map[string]map[string]Encoding) {
	t.Helper()
	src, err := synth.Model(synth.Config(arch, false), 4)
	require.NoError(t, err)
	qm := quantized.Model(t, src, "int8")
	p, err := shard.PlanModel(qm, shard.Options{Stages: 2, AR: []int{4, 1}, CL: []int{64}})
	require.NoError(t, err)
	enc16 := func(lo, hi float32) Encoding {
		s := (hi - lo) / (1<<16 - 1)
		return Encoding{BW: 16, Scale: []float32{s}, Offset: []int64{int64(math.Round(float64(lo / s)))}}
	}
	encs := map[string]map[string]Encoding{}
	for _, g := range p.Graphs {
		m := map[string]Encoding{}
		for _, l := range [][]shard.Tensor{g.Inputs, g.Outputs} {
			for _, t := range l {
				switch {
				case t.Name == shard.Logits:
					m[t.Name] = enc16(-30, 30)
				case strings.HasPrefix(t.Name, "hidden_states_"):
					m[t.Name] = enc16(-8, 8)
				case strings.HasPrefix(t.Name, "past_key_"), strings.HasPrefix(t.Name, "past_value_"):
					m[t.Name] = enc16(-6, 6)
				}
			}
		}
		encs[g.Name] = m
	}
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

// TestSimulationNoEncodings: with no activation encodings (only the
// weights, which are the model's) the simulated staged decode gives the
// qmodel's own logits bit for bit; with 16-bit encodings the logits move,
// but stay close.
func TestSimulationNoEncodings(t *testing.T) {
	for _, arch := range []model.Arch{model.Qwen35, model.Llama} {
		t.Run(string(arch), func(t *testing.T) {
			qm, p, encs := simModel(t, arch)
			prompt, cont := []int32{1, 40, 300, 7}, []int32{9, 100, 250, 31, 77, 5, 400}
			e, err := New(qm, Options{Context: 64})
			require.NoError(t, err)
			want := floatLogits(t, e, prompt, cont)

			none := map[string]map[string]Encoding{}
			for _, g := range p.Graphs {
				none[g.Name] = nil
			}
			sim, err := NewSimulation(p, none)
			require.NoError(t, err)
			assert.Zero(t, sim.Tensors)
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

			full, err := NewSimulation(p, encs)
			require.NoError(t, err)
			assert.NotZero(t, full.Tensors)
			st, err = NewSimulated(e, p, full)
			require.NoError(t, err)
			q, err := st.TeacherForced(context.Background(), prompt, cont)
			require.NoError(t, err)
			moved := false
			for i := range want {
				moved = moved || !equalBits(q[i], want[i])
				assert.Greater(t, cosine(q[i], want[i]), 0.999, "row %d", i)
			}
			assert.True(t, moved, "the encodings changed no logit")
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

// TestSimulationRefuses: encodings that do not fit the plan are errors
// naming what is wrong.
func TestSimulationRefuses(t *testing.T) {
	_, p, encs := simModel(t, model.Llama)
	g := p.Graphs[0].Name
	one := Encoding{BW: 16, Scale: []float32{1}, Offset: []int64{-1 << 15}}
	for _, tc := range []struct {
		name string
		edit func(m map[string]map[string]Encoding)
		want string
	}{
		{"missing graph", func(m map[string]map[string]Encoding) { delete(m, g) }, "no encodings for graph " + g},
		{"inner tensor", func(m map[string]map[string]Encoding) { m[g]["attn_out_0"] = one }, `"attn_out_0" names no input or output`},
		{"int tensor", func(m map[string]map[string]Encoding) { m[g][shard.InputIDs] = one }, "is int32, not float32"},
		{"block size", func(m map[string]map[string]Encoding) {
			m[g][shard.HiddenStates(0)] = Encoding{BW: 16, BlockSize: 3, Scale: []float32{1}, Offset: []int64{0}}
		}, "blocks of 3"},
		{"channels", func(m map[string]map[string]Encoding) {
			m[g][shard.HiddenStates(0)] = Encoding{BW: 16, Scale: make([]float32, 7), Offset: make([]int64, 7)}
		}, "7 scales do not divide"},
		{"offsets", func(m map[string]map[string]Encoding) {
			m[g][shard.HiddenStates(0)] = Encoding{BW: 16, Scale: []float32{1}}
		}, "1 scales and 0 offsets"},
	} {
		m := map[string]map[string]Encoding{}
		for k, v := range encs {
			m[k] = maps.Clone(v)
		}
		tc.edit(m)
		_, err := NewSimulation(p, m)
		if assert.Error(t, err, tc.name) {
			assert.Contains(t, err.Error(), tc.want, tc.name)
		}
	}
}
