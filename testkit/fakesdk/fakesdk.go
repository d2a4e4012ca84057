// Package fakesdk lays out a fake QAIRT SDK for the tests of the packages
// that run SDK jobs: qnnpack/testdata/fakesdk, a tool that checks every
// argument and input file, stands in for qairt-converter and
// qnn-context-binary-generator beside placeholder HTP libraries and the
// release's sdk.yaml.
//
// The layout is written from what a QAIRT zip holds (reference/qnn-genie.md),
// not from qnnpack's constants, so qnnpack's own tests can use it (it does
// not import qnnpack) and a wrong path there does not go unnoticed.
package fakesdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit"
)

// Version is the fake SDK's release, in its sdk.yaml and directory name.
const Version = "2.40.0.251030"

// Host is the part of the SDK a build machine uses.
type Host struct {
	Dir string // the folder under bin/ and lib/, e.g. "x86_64-linux-clang"
	// Windows names the context-binary generator .exe and the libraries
	// NAME.dll, and runs the converter (a Python entry point) through a
	// fake "python" put first on $PATH.
	Windows bool
}

// Linux is the x86-64 Linux layout.
var Linux = Host{Dir: "x86_64-linux-clang"}

// Root lays out Linux's part of a fake SDK and returns its root.
func Root(tb testing.TB) string { return RootFor(tb, Linux) }

// RootFor lays out host h's part of a fake SDK under a new directory named
// like the zip's (qairt/VERSION) and returns its root: the two tools, the
// HTP, net-run-extensions and model-DLC libraries, and sdk.yaml.
func RootFor(tb testing.TB, h Host) string {
	tb.Helper()
	tool := build(tb)
	root := filepath.Join(tb.TempDir(), "qairt", Version)
	bin, lib := filepath.Join(root, "bin", h.Dir), filepath.Join(root, "lib", h.Dir)
	for _, d := range []string{bin, lib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	ctxgen, libName := "qnn-context-binary-generator", func(stem string) string { return "lib" + stem + ".so" }
	if h.Windows {
		ctxgen, libName = ctxgen+".exe", func(stem string) string { return stem + ".dll" }
		py := tb.TempDir()
		if err := os.Symlink(tool, filepath.Join(py, "python")); err != nil {
			tb.Fatal(err)
		}
		tb.Setenv("PATH", py+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	for _, name := range []string{"qairt-converter", ctxgen} {
		if err := os.Symlink(tool, filepath.Join(bin, name)); err != nil {
			tb.Fatal(err)
		}
	}
	for _, stem := range []string{"QnnHtp", "QnnHtpNetRunExtensions", "QnnModelDlc"} {
		if err := os.WriteFile(filepath.Join(lib, libName(stem)), []byte("fake "+stem), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	yaml := "name: qairt\nversion: " + Version + "\n"
	if err := os.WriteFile(filepath.Join(root, "sdk.yaml"), []byte(yaml), 0o644); err != nil {
		tb.Fatal(err)
	}
	return root
}

// Main runs the tests of a package that uses the fake SDK and removes the
// tool built for them; call it from TestMain: os.Exit(fakesdk.Main(m)).
func Main(m *testing.M) int {
	built.main = true
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	return code
}

// built is the tool, built once per test binary.
var built struct {
	once sync.Once
	main bool // Main runs the tests, so the tool is removed after them
	dir  string
	path string
	err  error
}

func build(tb testing.TB) string {
	tb.Helper()
	if !built.main {
		tb.Fatal("fakesdk: the package's TestMain must call fakesdk.Main (it removes the tool built for the tests)")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "qnnprep-fakesdk-")
		if built.err != nil {
			return
		}
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = "/usr/local/go/bin/go"
		}
		// testkit.File names testdata/...; the tool's source is beside it.
		src := filepath.Join(filepath.Dir(testkit.File(".")), "qnnpack", "testdata", "fakesdk")
		built.path = filepath.Join(built.dir, "fakesdk")
		if out, err := exec.Command(gobin, "build", "-o", built.path, src).CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build fake SDK: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		tb.Fatal(built.err)
	}
	return built.path
}

// Call is one run of a fake tool, as it logs it to $FAKESDK_CALLS.
type Call struct {
	Exe  string   `json:"exe"` // the program run: python or the tool's file name
	Tool string   `json:"tool"`
	Args []string `json:"args"`
}

// Flag returns the argument after name, or "".
func (c Call) Flag(name string) string {
	for i, a := range c.Args {
		if a == name && i+1 < len(c.Args) {
			return c.Args[i+1]
		}
	}
	return ""
}

// Calls reads the call log at path (the file $FAKESDK_CALLS names) and
// removes it, so that the next read sees only later runs; no log is no
// calls.
func Calls(tb testing.TB, path string) []Call {
	tb.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	var out []Call
	for _, line := range strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' }) {
		var c Call
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		out = append(out, c)
	}
	if err := os.Remove(path); err != nil {
		tb.Fatal(err)
	}
	return out
}

// ModelConfig is the small llama-like model whose plans the tests build
// with the fake SDK.
func ModelConfig(layers int) model.Config {
	c := model.Config{
		Arch: model.Llama, VocabSize: 320, Hidden: 64, Layers: layers, FFN: 128,
		Heads: 4, KVHeads: 2, HeadDim: 16, ContextLength: 256,
		RMSEps: 1e-5, RopeTheta: 500000, RopeDim: 16, BOS: 1, EOS: 2,
	}
	c.LayerKinds = make([]model.LayerKind, layers)
	return c
}

// WriteGraph writes stand-in inputs for the fake tools for graph g into
// dir: an ONNX model with g's inputs and outputs (each output an Identity
// of the first input) and an encodings file for its encoded tensors;
// salt changes both files' bytes. It returns their paths.
func WriteGraph(tb testing.TB, dir string, g *shard.Graph, salt string) (onnxPath, encodingsPath string) {
	tb.Helper()
	og := onnx.NewGraph(g.Name)
	var first string
	for _, in := range g.Inputs {
		typ := onnx.Float
		if in.DType == "int32" {
			typ = onnx.Int32
		}
		if n := og.Input(in.Name, typ, in.Shape...); first == "" {
			first = n
		}
	}
	for _, out := range g.Outputs {
		og.Output(out.Name, onnx.Float, out.Shape...)
		og.Node("Identity", []string{first}, []string{out.Name})
	}
	onnxPath, encodingsPath = filepath.Join(dir, g.Name+".onnx"), filepath.Join(dir, g.Name+".encodings")
	if err := og.WriteFile(onnxPath, onnx.WriteOptions{Producer: "fakesdk-test", Version: salt}); err != nil {
		tb.Fatal(err)
	}
	act := map[string]any{}
	for _, list := range [][]shard.Tensor{g.Inputs, g.Outputs} {
		for _, tn := range list {
			if tn.Encoding != "" {
				act[tn.Name] = []map[string]any{{"bitwidth": 16, "dtype": "int", "is_symmetric": "False", "min": -8.0, "max": 8.0, "offset": -32768, "scale": 16.0 / 65535}}
			}
		}
	}
	enc, err := json.Marshal(map[string]any{"version": "0.6.1", "activation_encodings": act, "param_encodings": map[string]any{}, "salt": salt})
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(encodingsPath, enc, 0o644); err != nil {
		tb.Fatal(err)
	}
	return onnxPath, encodingsPath
}
