package scaleout

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

// testPlan plans 8 layers of growing size into 4 stages.
func testPlan(t testing.TB) *shard.Plan {
	t.Helper()
	cfg := fakesdk.ModelConfig(8)
	sizes := make([]int64, cfg.Layers)
	for i := range sizes {
		sizes[i] = int64(i+1) << 20
	}
	p, err := shard.NewPlan(cfg, shard.Sizes{Layers: sizes, Head: 1 << 20, Embed: 1 << 20}, "tiny",
		shard.Options{Stages: 4, AR: []int{16, 1}, CL: []int{128}})
	require.NoError(t, err)
	return p
}

// writeGraphs writes fake SDK inputs for every graph of p into dir
// (fakesdk.WriteGraph).
func writeGraphs(t testing.TB, p *shard.Plan, dir string) map[string]qnnpack.GraphFiles {
	t.Helper()
	files := map[string]qnnpack.GraphFiles{}
	for i := range p.Graphs {
		g := &p.Graphs[i]
		var f qnnpack.GraphFiles
		f.ONNX, f.Encodings = fakesdk.WriteGraph(t, dir, g, "1")
		files[g.Name] = f
	}
	return files
}

// env is a plan with its exported graphs and a fake SDK.
type env struct {
	sdk   *qnnpack.SDK
	plan  *shard.Plan
	files map[string]qnnpack.GraphFiles
	in    string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	sdk, err := qnnpack.FindSDK(fakesdk.Root(t))
	require.NoError(t, err)
	e := &env{sdk: sdk, plan: testPlan(t), in: t.TempDir()}
	e.files = writeGraphs(t, e.plan, e.in)
	require.NoError(t, os.WriteFile(filepath.Join(e.in, "tokenizer.json"), []byte(`{"model":{"type":"BPE"}}`), 0o644))
	return e
}

func (e *env) options(out, work string) qnnpack.BuildOptions {
	return qnnpack.BuildOptions{
		SDK: e.sdk, Plan: e.plan, Config: fakesdk.ModelConfig(8), Graphs: e.files, OutDir: out, WorkDir: work,
		SoC: "8elite", QnnprepVersion: "test", Tokenizer: filepath.Join(e.in, "tokenizer.json"),
	}
}
