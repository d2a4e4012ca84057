package qnnpack

import (
	"bufio"
	"encoding/json"
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

type call struct {
	Exe  string   `json:"exe"` // the program run: python or the tool's file name
	Tool string   `json:"tool"`
	Args []string `json:"args"`
}

// calls reads the fake SDK's invocation log and truncates it.
func calls(t *testing.T, path string) []call {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []call
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c call
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		out = append(out, c)
	}
	os.Remove(path)
	return out
}

// flag returns the value after name in args.
func flag(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func graphOf(c call) string {
	if c.Tool == ToolConverter {
		return strings.TrimSuffix(filepath.Base(flag(c.Args, "--output_path")), ".dlc")
	}
	return flag(c.Args, "--binary_file")
}

func oneBitTypes() []gguf.Type { return []gguf.Type{gguf.Q1_0} }
