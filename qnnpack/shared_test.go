package qnnpack

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

// TestBuildSharedStageData builds (fake SDK) the export of a two-stage
// plan with AR 16 and 1, whose variants share one external data file per
// stage: FindGraphFiles lists it for both variants, both converter jobs
// read it (the fake converter resolves every external initializer), and a
// change to one stage's data file re-runs that stage's converters and
// context job only.
func TestBuildSharedStageData(t *testing.T) {
	e := newBuildEnv(t, shard.Options{}) // AR 16 and 1
	cfg := fakesdk.ModelConfig(4)
	m, err := synth.Model(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	graphs := filepath.Join(t.TempDir(), "onnx")
	if _, err := onnx.Export(m, e.plan, graphs, onnx.ExportOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	files, err := FindGraphFiles(e.plan, graphs)
	if err != nil {
		t.Fatal(err)
	}
	for s, st := range e.plan.Stages {
		want := []string{filepath.Join(graphs, onnx.StageDataName(e.plan, s))}
		for _, g := range st.Graphs {
			if !slices.Equal(files[g].Data, want) {
				t.Errorf("%s: data files %v, want %v", g, files[g].Data, want)
			}
		}
	}
	o := e.options()
	o.Graphs, o.Config = files, cfg
	res, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range res.Jobs {
		if j.Tool != ToolConverter {
			continue
		}
		data, _ := filepath.Abs(filepath.Join(graphs, onnx.StageDataName(e.plan, j.Stage)))
		if !slices.Contains(j.Inputs, data) {
			t.Errorf("%s: inputs %v lack the stage's data file", j.Name(), j.Inputs)
		}
	}
	fakesdk.Calls(t, e.calls)

	// Change a byte of stage 2's weights: both its variants convert again.
	path := filepath.Join(graphs, onnx.StageDataName(e.plan, 1))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, c := range fakesdk.Calls(t, e.calls) {
		ran = append(ran, c.Tool+" "+graphOf(c))
	}
	var want []string
	for _, g := range e.plan.Stages[1].Graphs {
		want = append(want, ToolConverter+" "+g)
	}
	want = append(want, ToolCtxGen+" "+ContextBinaryName(e.plan, 1))
	slices.Sort(ran)
	slices.Sort(want)
	if !slices.Equal(ran, want) {
		t.Errorf("after changing %s ran %v, want %v", filepath.Base(path), ran, want)
	}
	if _, err := VerifyBundle(e.out); err != nil {
		t.Fatal(err)
	}
}
