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
			m := randomModel(t, tinyConfig(arch), 1)
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
			if n != len(p.Graphs) {
				t.Fatalf("%d models for %d graphs", n, len(p.Graphs))
			}
		})
	}
}

// TestExportDeterministic exports the same plan twice, inline and with
// external data, and compares every file byte for byte.
func TestExportDeterministic(t *testing.T) {
	m := randomModel(t, tinyConfig(model.Qwen35), 3)
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
	m := randomModel(t, tinyConfig(model.Llama), 1)
	other := randomModel(t, tinyConfig(model.Qwen3), 1)
	p := testPlan(t, other, 1, []int{1}, 8)
	_, _, err := BuildStage(m, p, &p.Graphs[0], Options{})
	if err == nil || !strings.Contains(err.Error(), "does not fit") || !strings.Contains(err.Error(), `arch "qwen3"`) {
		t.Fatalf("err = %v", err)
	}
}
