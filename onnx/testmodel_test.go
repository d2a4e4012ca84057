package onnx

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// tinyModel is synth's model of cfg and seed, all F32 (independent of any
// quantizer: the float graph is checked against the runtime on it).
func tinyModel(t testing.TB, cfg model.Config, seed uint64) *model.Model {
	t.Helper()
	m, err := synth.Model(cfg, seed)
	require.NoError(t, err)
	m.Path = "synthetic-" + string(cfg.Arch)
	return m
}

// testPlan splits m into stages for AR values ars at context cl.
func testPlan(t testing.TB, m *model.Model, stages int, ars []int, cl int) *shard.Plan {
	t.Helper()
	p, err := shard.NewPlan(m.Config, shard.Sizes{Layers: make([]int64, m.Config.Layers)}, "tiny_"+string(m.Config.Arch),
		shard.Options{Stages: stages, AR: ars, CL: []int{cl}})
	require.NoError(t, err)
	return p
}
