package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/shard"
)

// TestExportFlags: each export flag changes the written graphs as
// documented, against an export without it.
func TestExportFlags(t *testing.T) {
	src := synthLlamaGGUF(t) // rows of 128: Q1_0 weights
	dir := t.TempDir()
	q := filepath.Join(dir, "q1.gguf")
	plan := filepath.Join(dir, "plan.json")
	bad := filepath.Join(dir, "bad.json") // context.size above the largest CL
	for _, args := range [][]string{
		{"quantize", src, q, "--recipe", "q1"},
		{"plan", q, "--layers-per-stage", "1", "--ar", "32,1", "--cl", "128", "-o", plan},
		{"plan", q, "--layers-per-stage", "1", "--ar", "32,1", "--cl", "128", "--context-size", "256", "-o", bad},
	} {
		var code int
		captureStdout(t, func() { code = run(args) })
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
	}
	p, err := shard.ReadPlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	g := p.Graphs[0].Name // stage 1, AR 32: has hidden_states_0 as output
	ranges := writeText(t, dir, "ranges.json", `{"hidden_states_0": [-3, 5]}`)

	export := func(t *testing.T, args ...string) (string, int) {
		out := filepath.Join(t.TempDir(), "onnx")
		var code int
		captureStdout(t, func() { code = run(append([]string{"export", "onnx", plan, q, out, "-q"}, args...)) })
		return out, code
	}
	model := func(t *testing.T, out string) (opset, ir int64) {
		m, err := onnx.Read(filepath.Join(out, g+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		return m.OpsetImport[0].GetVersion(), m.GetIrVersion()
	}
	enc := func(t *testing.T, out string) *onnx.Encodings {
		e, err := onnx.ReadEncodings(filepath.Join(out, g+".encodings.json"))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	bits := func(e *onnx.Encodings) string {
		var bw []string
		for _, p := range e.ParamEncodings {
			if p.BlockSize == 128 { // the Q1_0 weights
				bw = append(bw, fmt.Sprint(p.BW))
			}
		}
		return strings.Join(bw, ",")
	}
	act := func(e *onnx.Encodings, name string) string {
		if a := e.Activation(name); a != nil {
			return fmt.Sprint(*a)
		}
		return ""
	}

	base, code := export(t)
	if code != 0 {
		t.Fatalf("export: exit %d", code)
	}
	baseOpset, baseIR := model(t, base)
	baseEnc := enc(t, base)
	if baseOpset != 17 || baseIR != 8 || !strings.HasPrefix(bits(baseEnc), "4") || act(baseEnc, "hidden_states_0") != "" {
		t.Fatalf("default export: opset %d, IR %d, Q1_0 bits %s, hidden_states_0 %q", baseOpset, baseIR, bits(baseEnc), act(baseEnc, "hidden_states_0"))
	}
	calibrated := ""
	for _, tt := range []struct {
		name  string
		args  []string
		check func(t *testing.T, out string) string
	}{
		{"opset", []string{"--opset", "18"}, func(t *testing.T, out string) string {
			o, _ := model(t, out)
			return want(o == 18, "opset %d", o)
		}},
		{"ir", []string{"--ir", "9"}, func(t *testing.T, out string) string {
			_, ir := model(t, out)
			return want(ir == 9, "IR %d", ir)
		}},
		{"ranges", []string{"--ranges", ranges}, func(t *testing.T, out string) string {
			a := enc(t, out).Activation("hidden_states_0")
			return want(a != nil && len(a.Scale) == 1 && a.Scale[0] > 0, "hidden_states_0 %v", a)
		}},
		{"calibrate", []string{"--calibrate", "4"}, func(t *testing.T, out string) string {
			calibrated = act(enc(t, out), "hidden_states_0")
			return want(calibrated != "", "no calibrated hidden_states_0")
		}},
		{"calib-ids", []string{"--calibrate", "4", "--calib-ids", "30,31,32"}, func(t *testing.T, out string) string {
			a := act(enc(t, out), "hidden_states_0")
			return want(a != "" && a != calibrated, "same range %s as a calibration from BOS %s", a, calibrated)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, code := export(t, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			if msg := tt.check(t, out); msg != "" {
				t.Errorf("%v: %s", tt.args, msg)
			}
		})
	}

	// The container is the plan's (plan --container): a plan sized for
	// 8 bits exports its Q1_0 codes in 8 bits.
	plan8 := filepath.Join(dir, "plan8.json")
	captureStdout(t, func() {
		if code := run([]string{"plan", q, "--layers-per-stage", "1", "--ar", "32,1", "--cl", "128", "--container", "8bit", "-o", plan8}); code != 0 {
			t.Fatalf("plan --container 8bit: exit %d", code)
		}
	})
	out8 := filepath.Join(t.TempDir(), "onnx")
	if code := run([]string{"export", "onnx", plan8, q, out8, "-q"}); code != 0 {
		t.Fatalf("export of the 8bit plan: exit %d", code)
	}
	if b := bits(enc(t, out8)); b == "" || strings.Contains(b, "4") {
		t.Errorf("8bit plan: Q1_0 bit widths %s", b)
	}

	// Stages with several AR variants always share one data file; with a
	// single variant, --external moves the weights out of the model.
	plan1 := filepath.Join(dir, "plan1.json")
	captureStdout(t, func() {
		if code := run([]string{"plan", q, "--layers-per-stage", "1", "--ar", "1", "--cl", "128", "-o", plan1}); code != 0 {
			t.Fatalf("plan --ar 1: exit %d", code)
		}
	})
	p1, err := shard.ReadPlan(plan1)
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "onnx")
		args := []string{"export", "onnx", plan1, q, out, "-q"}
		if ext {
			args = append(args, "--external")
		}
		if code := run(args); code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		data, err := onnx.ExternalData(filepath.Join(out, p1.Graphs[0].Name+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{filepath.Join(out, onnx.StageDataName(p1, 0))}; ext != slices.Equal(data, want) || !ext && len(data) > 0 {
			t.Errorf("--external=%v: external data %v", ext, data)
		}
	}
	for _, gname := range p.Stages[0].Graphs {
		data, err := onnx.ExternalData(filepath.Join(base, gname+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) != 1 || filepath.Base(data[0]) != onnx.StageDataName(p, 0) {
			t.Errorf("%s without --external: external data %v, want the stage's shared file", gname, data)
		}
	}

	// --force exports a plan that breaks the Genie contract.
	for _, force := range []bool{false, true} {
		args := []string{"export", "onnx", bad, q, filepath.Join(t.TempDir(), "onnx"), "-q"}
		if force {
			args = append(args, "--force")
		}
		var code int
		captureStderr(t, func() { code = run(args) })
		if (code == 0) != force {
			t.Errorf("--force=%v on a violating plan: exit %d", force, code)
		}
	}
}
