package qnnpack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

func TestMain(m *testing.M) { os.Exit(fakesdk.Main(m)) }

// fakeSDK lays out an SDK root with the fake tools and placeholder
// libraries, like a QAIRT zip's x86-64 Linux part.
func fakeSDK(t *testing.T) string { return fakeSDKFor(t, LinuxX64) }

// fakeSDKFor lays out host h's part of an SDK (fakesdk.RootFor).
func fakeSDKFor(t *testing.T, h Host) string {
	t.Helper()
	return fakesdk.RootFor(t, fakesdk.Host{Dir: h.Dir, Windows: h.Windows})
}

func testPlan(t *testing.T, cfg model.Config, name string, opts shard.Options) *shard.Plan {
	t.Helper()
	sizes := make([]int64, cfg.Layers)
	for i := range sizes {
		sizes[i] = 1 << 20
	}
	if opts.Stages == 0 && opts.LayersPerStage == 0 {
		opts.Stages = 2
	}
	if opts.AR == nil {
		opts.AR, opts.CL = []int{16, 1}, []int{128}
	}
	p, err := shard.NewPlan(cfg, shard.Sizes{Layers: sizes, Head: 1 << 20, Embed: 1 << 20}, name, opts)
	require.NoError(t, err)
	return p
}

// writeGraph writes fake SDK inputs for g (fakesdk.WriteGraph); salt
// changes the bytes.
func writeGraph(t *testing.T, dir string, g *shard.Graph, salt string) GraphFiles {
	t.Helper()
	var f GraphFiles
	f.ONNX, f.Encodings = fakesdk.WriteGraph(t, dir, g, salt)
	return f
}

func writeGraphs(t *testing.T, p *shard.Plan, dir string) map[string]GraphFiles {
	t.Helper()
	files := map[string]GraphFiles{}
	for i := range p.Graphs {
		files[p.Graphs[i].Name] = writeGraph(t, dir, &p.Graphs[i], "v1")
	}
	return files
}

func graphOf(c fakesdk.Call) string {
	if c.Tool == ToolConverter {
		return strings.TrimSuffix(filepath.Base(c.Flag("--output_path")), ".dlc")
	}
	return c.Flag("--binary_file")
}

func oneBitTypes() []gguf.Type { return []gguf.Type{gguf.Q1_0} }
