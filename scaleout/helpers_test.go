package scaleout

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

func testConfig(layers int) model.Config {
	c := model.Config{
		Arch: model.Llama, VocabSize: 320, Hidden: 64, Layers: layers, FFN: 128,
		Heads: 4, KVHeads: 2, HeadDim: 16, ContextLength: 256,
		RMSEps: 1e-5, RopeTheta: 500000, RopeDim: 16, BOS: 1, EOS: 2,
	}
	c.LayerKinds = make([]model.LayerKind, layers)
	return c
}

// testPlan plans 8 layers of growing size into 4 stages.
func testPlan(t testing.TB) *shard.Plan {
	t.Helper()
	cfg := testConfig(8)
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
		SDK: e.sdk, Plan: e.plan, Config: testConfig(8), Graphs: e.files, OutDir: out, WorkDir: work,
		SoC: "8elite", QnnprepVersion: "test", Tokenizer: filepath.Join(e.in, "tokenizer.json"),
	}
}

// readTree returns every file under dir but qnnprep's output marker, by
// slash path.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	require.NoError(t, err)
	return files
}
