package shard

import (
	"errors"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/model"
)

// smallLlama is a small llama shape whose matrices hold whole Q1_0 and Q2_0
// blocks.
func smallLlama() model.Config {
	c := model.Config{
		Arch: model.Llama, VocabSize: 512, Hidden: 256, Layers: 4, FFN: 512,
		Heads: 4, KVHeads: 2, HeadDim: 64, RopeDim: 64, ContextLength: 256, RopeTheta: 10000, RMSEps: 1e-5, BOS: 1, EOS: 2,
	}
	c.LayerKinds = make([]model.LayerKind, c.Layers)
	return c
}

// shapeModel is a model of cfg's tensors, matrices of type matrix and the
// rest F32, whose data is never read (no Q8_0).
func shapeModel(t *testing.T, cfg model.Config, matrix gguf.Type) *model.Model {
	t.Helper()
	var ts []*model.Tensor
	for _, s := range model.ExpectedTensors(cfg) {
		typ := gguf.F32
		if len(s.Dims) == 2 && s.Dims[1] > 1 {
			typ = matrix
		}
		ts = append(ts, model.LazyTensor(s.Name, s.Dims, typ, func() ([]byte, error) { return nil, errors.New("shape only") }))
	}
	m, err := model.New(cfg, ts)
	require.NoError(t, err)
	m.Path = "other.gguf"
	return m
}

// TestSizedFor: a plan is refused for weights of its model's shape whose
// stages weigh otherwise, naming the stage, both sizes and the fix; its own
// model (in its container, with any dialog) passes.
func TestSizedFor(t *testing.T) {
	cfg := smallLlama()
	q1, f32 := shapeModel(t, cfg, gguf.Q1_0), shapeModel(t, cfg, gguf.F32)
	plan := func(m *model.Model, o Options) *Plan {
		t.Helper()
		if o.AR == nil {
			o.AR, o.CL = []int{4, 1}, []int{64}
		}
		p, err := PlanModel(m, o)
		require.NoError(t, err)
		return p
	}
	sizes := func(m *model.Model, c Container) Sizes {
		s, err := ModelSizes(m, c)
		require.NoError(t, err)
		return s
	}
	// One stage holds everything: the embedding, the layers and the head.
	whole := func(s Sizes) int64 {
		b := s.Embed + s.Head
		for _, l := range s.Layers {
			b += l
		}
		return b
	}
	q1Bytes, f32Bytes := whole(sizes(q1, Container4Bit)), whole(sizes(f32, Container4Bit))
	require.NotEqual(t, bytesize.Format(q1Bytes), bytesize.Format(f32Bytes))
	ssd := Dialog{Type: SSD, ForecastTokenCount: 2, Branches: []int{2}, ForecastPrefix: 16, ForecastPrefixName: "fp"}

	for _, tc := range []struct {
		name string
		plan func() *Plan
		m    *model.Model
		want string // a regexp; "" passes
	}{
		{"its own model", func() *Plan { return plan(q1, Options{Stages: 1}) }, q1, ""},
		{"its own model, 8bit container, two stages", func() *Plan { return plan(q1, Options{Stages: 2, Container: Container8Bit}) }, q1, ""},
		{"its own model, ssd-q1", func() *Plan { return plan(q1, Options{Stages: 2, Dialog: ssd}) }, q1, ""},
		{"its own F32 model", func() *Plan { return plan(f32, Options{Stages: 2}) }, f32, ""},
		{"F32 weights of the Q1_0 plan's shape", func() *Plan { return plan(q1, Options{Stages: 1}) }, f32,
			"^" + regexp.QuoteMeta("sized for other weights: stage 0 "+bytesize.Format(q1Bytes)+" on the device (4bit container), this model "+bytesize.Format(f32Bytes)+
				"; run `qnnprep plan other.gguf` (with the flags that made this plan) for a plan of this model") + "$"},
		{"Q1_0 weights of the F32 plan's shape, two stages", func() *Plan { return plan(f32, Options{Stages: 2}) }, q1, `^sized for other weights: stage 0 .* \(2 of 2 stages differ\); run`},
		{"measured in the plan's container", func() *Plan {
			p := plan(q1, Options{Stages: 1, Container: Container8Bit})
			p.Container = Container4Bit // as if planned in 4bit with the 8bit sizes
			return p
		}, q1, `^sized for other weights: stage 0 .* on the device \(4bit container\), this model `},
		{"other qmodel bytes", func() *Plan {
			p := plan(q1, Options{Stages: 2})
			p.Stages[1].QModelBytes++
			return p
		}, q1, `^sized for other weights: stage 1 [0-9]+ bytes in the qmodel, this model [0-9]+ bytes; `},
		{"other weight type", func() *Plan {
			p := plan(q1, Options{Stages: 1})
			p.Stages[0].WeightType = "Q2_0"
			return p
		}, q1, `^sized for other weights: stage 0 Q2_0 weights, this model Q1_0; `},
		{"stage past the model's layers", func() *Plan {
			p := plan(q1, Options{Stages: 1})
			p.Stages[0].LastLayer = cfg.Layers
			return p
		}, q1, `^stage 0 covers layers 0–4, but other.gguf has 4 layers$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.plan().SizedFor(tc.m)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Regexp(t, tc.want, err.Error())
		})
	}
}

// TestSizedForEqualSizes: sizes a rounded size would show alike are given
// in bytes.
func TestSizedForEqualSizes(t *testing.T) {
	m := shapeModel(t, smallLlama(), gguf.Q1_0)
	p, err := PlanModel(m, Options{Stages: 1, AR: []int{1}, CL: []int{64}})
	require.NoError(t, err)
	b := p.Stages[0].Bytes
	p.Stages[0].Bytes++
	err = p.SizedFor(m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stage 0 "+strconv.FormatInt(b+1, 10)+" bytes on the device (4bit container), this model "+strconv.FormatInt(b, 10)+" bytes")
}
