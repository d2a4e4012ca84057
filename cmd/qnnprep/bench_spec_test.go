package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writePlan runs qnnprep plan on src with args and returns the plan file.
func writePlan(t *testing.T, src, name string, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	var code int
	captureStdout(t, func() {
		code = run(append([]string{"plan", src, "--stages", "2", "--ar", "16,1", "--cl", "256", "-o", out}, args...))
	})
	if code != 0 {
		t.Fatalf("plan %v: exit %d", args, code)
	}
	return out
}

// estimateTokS runs qnnprep estimate --json with args and returns its
// tokens/s.
func estimateTokS(t *testing.T, args ...string) float64 {
	t.Helper()
	var code int
	out := captureStdout(t, func() { code = run(append([]string{"estimate", "--json"}, args...)) })
	var w struct {
		TokensPerSec float64 `json:"tokens_per_s"`
	}
	if err := json.Unmarshal([]byte(out), &w); code != 0 || err != nil {
		t.Fatalf("estimate %v: exit %d, %v:\n%s", args, code, err, out)
	}
	return w.TokensPerSec
}

// TestBenchSpecPlans: --plan adds a row per speculative dialog decoded
// through the staged runtime (spd drafting with --draft, ssd-q1 with
// --forecast-embeddings), --device gives every speculative row the device
// tokens/s that qnnprep estimate prints for the same plan (or the model's
// default plan's bytes), device and acceptance; every row is sane.
func TestBenchSpecPlans(t *testing.T) {
	src := synthLlamaGGUF(t)
	spd := writePlan(t, src, "spd.json", "--dialog", "spd", "--draft-len", "2")
	ssd := writePlan(t, src, "ssd.json", "--dialog", "ssd-q1", "--forecast-token-count", "2", "--branches", "2", "--forecast-prefix", "4", "--forecast-prefix-name", "fp")
	fc := writeForecastFile(t, 2, 256)
	dev := filepath.Join(t.TempDir(), "npu.json")
	if err := os.WriteFile(dev, []byte(`{"name":"npu","bandwidth_gb_per_s":20,"position_ms":1.5,"draft_step_ms":0.8,"host_ms":2}`), 0o644); err != nil {
		t.Fatal(err)
	}

	r := benchJSON(t, src, "--draft", src, "-k", "2", "--plan", spd+","+ssd, "--forecast-embeddings", fc, "--device", dev)
	dialogs := map[string]bool{}
	for _, x := range r.Speculative {
		dialogs[x.Dialog] = true
		if !x.Sane || x.Device == nil || x.TargetCallsPerToken > 1 || x.TokensPerWindow < 1 {
			t.Fatalf("%q: sane %v (%s), device %+v, %.3f target calls per token", x.Dialog, x.Sane, x.SanityNote, x.Device, x.TargetCallsPerToken)
		}
		acc := strconv.FormatFloat(x.AcceptanceLength, 'g', -1, 64)
		var want float64
		if x.Plan != "" {
			want = estimateTokS(t, "--plan", x.Plan, "--device", dev, "--acceptance", acc)
		} else {
			want = estimateTokS(t, "--weights-bytes", fmt.Sprint(int64(x.Device.WeightBytes)), "--device", dev, "-k", strconv.Itoa(x.K), "--acceptance", acc)
		}
		if math.Abs(x.Device.TokensPerSec-want) > 1e-9*want {
			t.Errorf("%q: bench's device column %.6f tokens/s, estimate %.6f", x.Dialog, x.Device.TokensPerSec, want)
		}
	}
	if len(r.Speculative) != 3 || !dialogs[""] || !dialogs["spd"] || !dialogs["ssd-q1"] {
		t.Fatalf("rows %v, want whole, spd and ssd-q1", dialogs)
	}
	if r.Settings.Device == nil || r.Settings.Device.Name != "npu" || len(r.Settings.Plans) != 2 {
		t.Errorf("settings %+v", r.Settings)
	}

	// Without --device no row has the column; without --plan only the
	// whole-model rows remain.
	r = benchJSON(t, src, "--draft", src, "-k", "2", "--plan", spd)
	if len(r.Speculative) != 2 || r.Speculative[0].Device != nil || r.Speculative[1].Dialog != "spd" {
		t.Errorf("without --device: %+v", r.Speculative)
	}
	r = benchJSON(t, src, "--draft", src, "-k", "2")
	if len(r.Speculative) != 1 || r.Speculative[0].Dialog != "" {
		t.Errorf("without --plan: %+v", r.Speculative)
	}

	// ssd-q1 needs --forecast-embeddings, spd a draft.
	for _, args := range [][]string{{"--plan", ssd}, {"--plan", spd}} {
		var code int
		stderr := captureStderr(t, func() {
			captureStdout(t, func() {
				code = run(append([]string{"bench", src, "-p", "0", "-n", "4", "-r", "1", "-t", "1", "-q", "--read-probe", "0"}, args...))
			})
		})
		if code == 0 || !strings.Contains(stderr, "bench: plan ") {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
	}
}

// The table shows the dialog rows with their device column.
func TestBenchSpecTable(t *testing.T) {
	src := synthLlamaGGUF(t)
	ssd := writePlan(t, src, "ssd.json", "--dialog", "ssd-q1", "--forecast-token-count", "1", "--branches", "3")
	dev := writeText(t, t.TempDir(), "npu.json", `{"name":"npu","bandwidth_gb_per_s":20,"position_ms":1.5,"draft_step_ms":0.8,"host_ms":2}`)
	var code int
	out := captureStdout(t, func() {
		code = run([]string{"bench", src, "-p", "0", "-n", "6", "-r", "1", "-t", "1", "-q", "--read-probe", "0", "--plan", ssd, "--forecast-embeddings", writeForecastFile(t, 1, 256), "--device", dev})
	})
	if code != 0 || !strings.Contains(out, "| ssd-q1 (ssd.json) |") || !strings.Contains(out, "(greedy ") || strings.Contains(out, "NO:") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}
