package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The published 1-bit 27B phone build: 3.80 GB at 33.5 GB/s, 29.4 ms per
// position, 10.6 ms per draft step, 27.9 ms host, K = 2, acceptance 0.72
// → a 240.0 ms window and 7.18 tok/s.
func TestEstimateCommand(t *testing.T) {
	dev := writeText(t, t.TempDir(), "phone.json", `{"name":"phone","bandwidth_gb_per_s":33.5,"position_ms":29.4,"draft_step_ms":10.6,"host_ms":27.9}`)
	for _, args := range [][]string{
		{"estimate", "--weights-gb", "3.80", "--device", dev, "-k", "2", "--acceptance", "0.72", "--json"},
		{"estimate", "--weights-bytes", "3800000000", "--bandwidth", "33.5", "--position-ms", "29.4", "--draft-step-ms", "10.6", "--host-ms", "27.9", "-k", "2", "--acceptance", "0.72", "--json"},
	} {
		var code int
		out := captureStdout(t, func() { code = run(args) })
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		var w struct {
			WindowMs     float64 `json:"window_ms"`
			TokensPerSec float64 `json:"tokens_per_s"`
		}
		if err := json.Unmarshal([]byte(out), &w); err != nil {
			t.Fatal(err, out)
		}
		if math.Abs(w.WindowMs-240.0)/240 > 0.01 || math.Abs(w.TokensPerSec-7.18)/7.18 > 0.01 {
			t.Errorf("%v: window %.2f ms, %.3f tok/s; want 240.0 ms and 7.18 tok/s ± 1%%", args, w.WindowMs, w.TokensPerSec)
		}
	}
	if code := run([]string{"estimate", "--bandwidth", "33"}); code != 2 {
		t.Errorf("no weights: exit %d, want 2", code)
	}
}

func TestEstimateFromPlan(t *testing.T) {
	plan := filepath.Join(t.TempDir(), "plan.json")
	runOK(t, "plan", storiesGGUF, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", plan)
	out := runOK(t, "estimate", "--plan", plan, "--bandwidth", "10", "--json")
	var w struct {
		WeightsMs float64 `json:"weights_ms"`
	}
	json.Unmarshal([]byte(out), &w)
	// stories260K's 48 F32 tensors: 1,185,376-byte file minus its 14,176-byte header.
	if want := float64(1185376-14176) / 10e9 * 1e3; math.Abs(w.WeightsMs-want) > 1e-9 {
		t.Errorf("weights term %.6f ms, want %.6f ms from the plan's bytes", w.WeightsMs, want)
	}
}

// estimate --plan streams what the device holds: for an int8 model one
// byte per weight plus a scale/offset pair per row, not the qmodel's Q8_0
// blocks (34 bytes per 32 weights).
func TestEstimateFromPlanDeviceBytes(t *testing.T) {
	dir := t.TempDir()
	q, plan := filepath.Join(dir, "q.gguf"), filepath.Join(dir, "plan.json")
	var code int
	captureStdout(t, func() {
		code = run([]string{"quantize", storiesGGUF, q, "--recipe", "int8"})
		if code == 0 {
			code = run([]string{"plan", q, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", plan})
		}
	})
	if code != 0 {
		t.Fatalf("quantize/plan: exit %d", code)
	}
	b, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Stages []struct {
			Bytes       int64 `json:"bytes"`
			QModelBytes int64 `json:"qmodel_bytes"`
		} `json:"stages"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	var dev, qm int64
	for _, s := range p.Stages {
		dev, qm = dev+s.Bytes, qm+s.QModelBytes
	}
	if dev == qm || qm == 0 {
		t.Fatalf("plan: %d device bytes, %d qmodel bytes; want two different sizes", dev, qm)
	}
	out := runOK(t, "estimate", "--plan", plan, "--bandwidth", "10", "--json")
	var w struct {
		WeightsMs float64 `json:"weights_ms"`
	}
	json.Unmarshal([]byte(out), &w)
	if want := float64(dev) / 10e9 * 1e3; math.Abs(w.WeightsMs-want) > 1e-9 {
		t.Errorf("weights term %.6f ms, want %.6f ms from %d device bytes (the qmodel's %d give %.6f)", w.WeightsMs, want, dev, qm, float64(qm)/10e9*1e3)
	}
}
