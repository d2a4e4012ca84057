package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/shard"
)

// TestExportCommand plans stories260K quantized to INT8, exports every
// stage, and checks the files: one model and one encodings file per
// graph, per-channel weight encodings, and the ONNX checker on each model.
func TestExportCommand(t *testing.T) {
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	dir := t.TempDir()
	q := filepath.Join(dir, "int8.gguf")
	if code := run([]string{"quantize", storiesGGUF, q, "--recipe", "int8"}); code != 0 {
		t.Fatalf("quantize exit %d", code)
	}
	plan := filepath.Join(dir, "plan.json")
	if code := run([]string{"plan", q, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", plan}); code != 0 {
		t.Fatalf("plan exit %d", code)
	}
	out := filepath.Join(dir, "onnx")
	if code := run([]string{"export", "onnx", plan, q, out, "-q"}); code != 0 {
		t.Fatalf("export exit %d", code)
	}
	p, err := shard.ReadPlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range p.Graphs {
		enc, err := onnx.ReadEncodings(filepath.Join(out, g.Name+".encodings.json"))
		if err != nil {
			t.Fatal(err)
		}
		perChannel := 0
		for _, e := range enc.ParamEncodings {
			if e.EncType == onnx.PerChannel && e.BW == 8 {
				perChannel++
			}
		}
		if perChannel == 0 {
			t.Errorf("%s: no per-channel INT8 weight encodings", g.Name)
		}
		model := filepath.Join(out, g.Name+".onnx")
		if _, err := os.Stat(model); err != nil {
			t.Fatal(err)
		}
		if peers.Check(peers.PythonONNX) == nil {
			if err := peers.ONNXCheck(model); err != nil {
				t.Error(err)
			}
		}
	}

	// --calibrate: every state's _in and _out, and each stage output, get
	// one encoding, identical across the AR variants.
	cal := filepath.Join(dir, "cal")
	if code := run([]string{"export", "onnx", plan, q, cal, "-q", "--calibrate", "8"}); code != 0 {
		t.Fatalf("export --calibrate exit %d", code)
	}
	seen := map[string]onnx.Encoding{}
	for _, g := range p.Graphs {
		enc, err := onnx.ReadEncodings(filepath.Join(cal, g.Name+".encodings.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, list := range [][]shard.Tensor{g.Inputs, g.Outputs} {
			for _, tt := range list {
				if tt.Encoding == "" {
					continue
				}
				e := enc.Activation(tt.Name)
				if e == nil {
					t.Errorf("%s: no activation encoding for %s", g.Name, tt.Name)
					continue
				}
				e.Name = tt.Encoding
				if prev, ok := seen[tt.Encoding]; ok && fmt.Sprint(prev) != fmt.Sprint(*e) {
					t.Errorf("%s: %s encoded %v, elsewhere in group %s %v", g.Name, tt.Name, *e, tt.Encoding, prev)
				}
				seen[tt.Encoding] = *e
			}
		}
	}

	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"export", "onnx", plan, q}, 2},                                 // no OUTDIR
		{[]string{"export", "tflite", plan, q, out}, 2},                          // unknown format
		{[]string{"export", "onnx", plan, q, out, "--container", "8bit"}, 2},     // the plan's container decides
		{[]string{"export", "onnx", plan, q, out, "--opset", "13"}, 2},           // too old
		{[]string{"export", "onnx", filepath.Join(dir, "none.json"), q, out}, 1}, // missing plan
		{[]string{"export", "onnx", plan, filepath.Join(dir, "none.gguf"), out}, 1},
	} {
		if code := run(tc.args); code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args[1:], code, tc.code)
		}
	}
}
