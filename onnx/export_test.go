package onnx

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit"
)

var archs = []model.Arch{model.Llama, model.Qwen2, model.Qwen3, model.Qwen3Next, model.Qwen35}

// TestExportChecker exports every graph of two-stage plans (a prompt AR,
// AR 1, and an AR-c variant) of every architecture, alternately inline
// and with external data, and runs the ONNX checker with full_check
// (shape inference in strict mode) on each.
func TestExportChecker(t *testing.T) {
	testkit.Need(t, peers.PythonONNX)
	for i, arch := range archs {
		t.Run(string(arch), func(t *testing.T) {
			m := tinyModel(t, synth.Config(arch, true), 1)
			p, err := shard.NewPlan(m.Config, shard.Sizes{Layers: make([]int64, m.Config.Layers)}, "tiny_"+string(arch),
				shard.Options{Stages: 2, AR: []int{4, 1, 16}, CL: []int{16}, ARc: true})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			paths, err := Export(m, p, dir, ExportOptions{External: i%2 == 0}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := checkONNX(t, paths); n != len(p.Graphs) {
				t.Fatalf("%d models for %d graphs", n, len(p.Graphs))
			}
		})
	}
}

// checkONNX runs the ONNX checker (full_check) on every .onnx file of
// paths, reporting each failure, and returns how many it checked.
func checkONNX(t *testing.T, paths []string) int {
	t.Helper()
	n := 0
	for _, path := range paths {
		if filepath.Ext(path) != ".onnx" {
			continue
		}
		n++
		if err := peers.ONNXCheck(path); err != nil {
			t.Error(err)
		}
	}
	return n
}

// TestExportDeterministic exports the same plan twice, inline and with
// external data, and compares every file byte for byte.
func TestExportDeterministic(t *testing.T) {
	m := tinyModel(t, synth.Config(model.Qwen35, true), 3)
	p := testPlan(t, m, 2, []int{4, 1}, 16)
	for _, ext := range []bool{false, true} {
		a, b := t.TempDir(), t.TempDir()
		pa, err := Export(m, p, a, ExportOptions{External: ext}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Export(m, p, b, ExportOptions{External: ext}, nil); err != nil {
			t.Fatal(err)
		}
		for _, path := range pa {
			x, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			y, err := os.ReadFile(filepath.Join(b, filepath.Base(path)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(x, y) {
				t.Errorf("external=%v: %s differs between two exports", ext, filepath.Base(path))
			}
		}
	}
}

// TestBuildStageRejectsOtherModel: a plan made for another model is an
// error naming the fields that differ, not a broken graph.
func TestBuildStageRejectsOtherModel(t *testing.T) {
	m := tinyModel(t, synth.Config(model.Llama, true), 1)
	other := tinyModel(t, synth.Config(model.Qwen3, true), 1)
	p := testPlan(t, other, 1, []int{1}, 8)
	_, _, err := BuildStage(m, p, &p.Graphs[0], Options{})
	if err == nil || !strings.Contains(err.Error(), "does not fit") || !strings.Contains(err.Error(), `arch "qwen3"`) {
		t.Fatalf("err = %v", err)
	}
}

// TestExportSharesStageWeights exports a two-stage qwen35 (int8) plan
// with AR 4 and 1 and checks that each stage's variants keep their
// weights in one data file: no per-graph data file, every variant
// references the same bytes for each weight, and the stage's data is no
// larger than 1.1× a single-variant export's.
func TestExportSharesStageWeights(t *testing.T) {
	m := qmodel(t, model.Qwen35, "int8")
	two := testPlan(t, m, 2, []int{4, 1}, 16)
	one := testPlan(t, m, 2, []int{4}, 16)
	dirTwo, dirOne := t.TempDir(), t.TempDir()
	if _, err := Export(m, two, dirTwo, ExportOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(m, one, dirOne, ExportOptions{External: true}, nil); err != nil {
		t.Fatal(err)
	}
	for s := range two.Stages {
		name := StageDataName(two, s)
		shared, err := os.Stat(filepath.Join(dirTwo, name))
		if err != nil {
			t.Fatalf("stage %d: no shared data file: %v", s+1, err)
		}
		single, err := os.Stat(filepath.Join(dirOne, name))
		if err != nil {
			t.Fatal(err)
		}
		if float64(shared.Size()) > 1.1*float64(single.Size()) {
			t.Errorf("stage %d: %d bytes of data for two variants, %d for one: want at most 1.1×", s+1, shared.Size(), single.Size())
		}
		var first map[string]string
		for _, g := range two.Stages[s].Graphs {
			path := filepath.Join(dirTwo, g+".onnx")
			files, err := ExternalData(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 1 || filepath.Base(files[0]) != name {
				t.Errorf("%s references %v, want only %s", g, files, name)
			}
			if _, err := os.Stat(path + ".data"); err == nil {
				t.Errorf("%s has a data file of its own", g)
			}
			w := externalSpans(t, path)
			if first == nil {
				first = w
				continue
			}
			for n, at := range first {
				if m.Tensor(n) == nil && n != "output.weight" {
					continue // a graph constant, which may differ by AR
				}
				if w[n] != at {
					t.Errorf("%s: weight %s at %s, the first variant's at %s", g, n, w[n], at)
				}
			}
		}
	}
}

// TestExportRefusesPartialStage: a plan holding only some of a stage's
// graphs would overwrite the data file the others reference.
func TestExportRefusesPartialStage(t *testing.T) {
	m := tinyModel(t, synth.Config(model.Llama, true), 1)
	p := testPlan(t, m, 1, []int{4, 1}, 16)
	one := *p
	one.Graphs = p.Graphs[:1]
	_, err := Export(m, &one, t.TempDir(), ExportOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "exported together") {
		t.Fatalf("err = %v", err)
	}
}

// externalSpans gives each external initializer of the model at path as
// "location offset length".
func externalSpans(t *testing.T, path string) map[string]string {
	t.Helper()
	mp, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, in := range mp.Graph.Initializer {
		var parts []string
		for _, kv := range in.ExternalData {
			parts = append(parts, kv.Value)
		}
		if len(parts) > 0 {
			out[in.Name] = strings.Join(parts, " ")
		}
	}
	return out
}
