package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/safetensors"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// specPlanFile writes m's plan with dialog d (AR 16 and 1, CL 256).
func specPlanFile(t *testing.T, path string, d shard.Dialog) string {
	t.Helper()
	m, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err := shard.PlanModel(m, shard.Options{Stages: 2, AR: []int{16, 1}, CL: []int{256}, Dialog: d})
	if err != nil {
		t.Fatal(err)
	}
	// An eaglet plan without its head's draft graphs is refused by Check
	// but serves to show bench's refusal.
	if vs := shard.Check(p, shard.CheckEnv{}); len(vs) != 0 && d.Type != shard.Eaglet {
		t.Fatalf("%s plan: %v", d.Type, vs)
	}
	out := filepath.Join(t.TempDir(), string(d.Type)+".json")
	if err := shard.WritePlan(out, p); err != nil {
		t.Fatal(err)
	}
	return out
}

// forecastFile writes rows random forecast embeddings of hidden values;
// random rows change only what the ssd-q1 dialog drafts.
func forecastFile(t *testing.T, rows, hidden int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 0, 4*rows*hidden)
	for range rows * hidden {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(rng.NormFloat64())))
	}
	path := filepath.Join(t.TempDir(), "forecast.safetensors")
	w := &safetensors.Writer{Tensors: []safetensors.WriterTensor{{Name: "forecast_embedding", Dtype: safetensors.F32, Shape: []int64{int64(rows), int64(hidden)}, Data: safetensors.Bytes(b)}}}
	if err := safetensors.WriteFile(path, w); err != nil {
		t.Fatal(err)
	}
	return path
}

// eagle3File writes a random EAGLE-3 head for smallModel's configuration
// with 128 draft tokens; a random head changes only what is drafted.
func eagle3File(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "eagle3.gguf")
	if err := synth.WriteEagle3(path, synth.Config(model.Llama, true), 128, 5); err != nil {
		t.Fatal(err)
	}
	return path
}

// eagletPlanFile writes m's eaglet plan for head (AR 16 and 1, CL 256).
func eagletPlanFile(t *testing.T, path, head string, d shard.Dialog) string {
	t.Helper()
	m, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := runtime.New(m, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	h, err := runtime.OpenEagle3(e, head)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eh := h.EagletHead()
	p, err := shard.PlanModel(m, shard.Options{Stages: 2, AR: []int{16, 1}, CL: []int{256}, Dialog: d, EagletHead: &eh})
	if err != nil {
		t.Fatal(err)
	}
	if vs := shard.Check(p, shard.CheckEnv{}); len(vs) != 0 {
		t.Fatalf("eaglet plan: %v", vs)
	}
	out := filepath.Join(t.TempDir(), "eaglet.json")
	if err := shard.WritePlan(out, p); err != nil {
		t.Fatal(err)
	}
	return out
}

var testDevice = qnnpack.Device{Name: "test-npu", BandwidthGBps: 10, PositionMs: 2, DraftStepMs: 1, HostMs: 3}

var (
	spdDialog    = shard.Dialog{Type: shard.SPD, DraftLen: 3}
	ssdDialog    = shard.Dialog{Type: shard.SSD, ForecastTokenCount: 2, Branches: []int{2, 1}, ForecastPrefix: 4, ForecastPrefixName: "fp"}
	eagletDialog = shard.Dialog{Type: shard.Eaglet, DraftLen: 3, NBranches: 2, MaxTargetTokens: 8}
)

// TestSpecDialogs: on the text prompt, the whole-model engine with a
// truncated draft, the spd dialog (the target as its own draft model) and
// the ssd-q1 dialog (random forecast rows) through the staged runtime
// each give a sane row: tokens equal to greedy and to the reference, at
// least one token per target call, and the device column that
// qnnpack.EstimateSpec gives for the row's plan and acceptance.
func TestSpecDialogs(t *testing.T) {
	p := smallModel(t, gguf.Q8_0)
	spd, ssd := specPlanFile(t, p, spdDialog), specPlanFile(t, p, ssdDialog)
	fc := forecastFile(t, 2, 256)
	dev := testDevice
	opt := Options{Prompt: 0, Gen: 10, Reps: 1, Threads: []int{2}, DraftPath: p, K: []int{2}, Plans: []string{spd, ssd}, ForecastPath: fc, Device: &dev}
	rep, err := Run(context.Background(), p, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Settings.SpecPrompt, "text: ") {
		t.Errorf("speculative prompt %q, want text", rep.Settings.SpecPrompt)
	}
	plans := map[string]*shard.Plan{}
	for _, path := range []string{spd, ssd} {
		pl, err := shard.ReadPlan(path)
		if err != nil {
			t.Fatal(err)
		}
		plans[path] = pl
	}
	byDialog := map[string]SpecResult{}
	for _, x := range rep.Speculative {
		byDialog[x.Dialog] = x
		if !x.Sane || x.SanityNote != "" {
			t.Errorf("%q: sane %v (%s)", x.Dialog, x.Sane, x.SanityNote)
		}
		if x.TokensPerWindow < 1 || x.TargetCallsPerToken <= 0 || x.TargetCallsPerToken > 1 || x.AcceptanceLength < 0 || x.AcceptanceLength > float64(x.K) {
			t.Errorf("%q: %.2f tokens per window, %.3f target calls per token, acceptance %.2f of %d", x.Dialog, x.TokensPerWindow, x.TargetCallsPerToken, x.AcceptanceLength, x.K)
		}
		want := qnnpack.ChainSpec(x.K, x.AcceptanceLength)
		var bytes float64
		if x.Plan != "" {
			if want, err = qnnpack.DialogSpec(plans[x.Plan], x.AcceptanceLength); err != nil {
				t.Fatal(err)
			}
			bytes = qnnpack.PlanWeightBytes(plans[x.Plan])
		} else {
			m, _ := model.Open(p)
			dp, err := shard.PlanModel(m, shard.Options{})
			m.Close()
			if err != nil {
				t.Fatal(err)
			}
			bytes = qnnpack.PlanWeightBytes(dp)
		}
		w, err := qnnpack.EstimateSpec(dev, bytes, want, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d := x.Device; d == nil || d.TokensPerSec != w.TokensPerSec || d.WindowMs != w.WindowMs || d.WeightBytes != bytes || d.Positions != want.Positions {
			t.Errorf("%q: device %+v, want %+v from %g bytes", x.Dialog, d, w, bytes)
		}
	}
	if len(rep.Speculative) != 3 || len(byDialog) != 3 {
		t.Fatalf("%d speculative rows %v, want whole, spd and ssd-q1", len(rep.Speculative), byDialog)
	}
	// The target drafting for itself: every proposal is accepted.
	if x := byDialog["spd"]; x.K != 3 || x.AcceptanceRate != 1 || x.TargetCallsPerToken >= 1 || x.Drafter != "draft "+p {
		t.Errorf("spd: %+v; want K = draft-len 3, every draft accepted", x)
	}
	if x := byDialog["ssd-q1"]; x.K != 4 || x.Device.Positions != 5*3 || x.Device.DraftSteps != 0 {
		t.Errorf("ssd-q1: K %d, device %+v; want the tree's 4 proposals, 15 positions, no draft steps", x.K, x.Device)
	}
	if !rep.Sane || rep.Settings.Device == nil || len(rep.Settings.Plans) != 2 {
		t.Errorf("report sane %v, settings %+v", rep.Sane, rep.Settings)
	}

	s := NewSuite([]*Report{rep}, nil)
	tb := validTable(t, s)
	for _, want := range []string{"| whole |", "| spd (spd.json) |", "| ssd-q1 (ssd-q1.json) |", "target calls/token", "device t/s", "(greedy "} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table has no %q:\n%s", want, tb.String())
		}
	}
	if strings.Contains(tb.String(), "NO:") {
		t.Errorf("table:\n%s", tb.String())
	}
	t.Logf("\n%s", tb.String())

	// CSV: the dialog in the test column, target calls and the device
	// estimate in their own.
	rows, col := suiteCSV(t, s)
	tests := map[string]bool{}
	for _, row := range rows[1:] {
		if row[col["kind"]] != "spec" {
			continue
		}
		tests[row[col["test"]]] = true
		if row[col["device_tokens_per_s"]] == "" || row[col["target_calls_per_token"]] == "" {
			t.Errorf("CSV row %v has no device or target calls column", row)
		}
	}
	if !tests["spec-k2"] || !tests["spd-k3"] || !tests["ssd-q1-k4"] {
		t.Errorf("CSV speculative tests %v, want spec-k2, spd-k3 and ssd-q1-k4", tests)
	}
	var img bytes.Buffer
	if err := Plot(&img, "svg", s); err != nil || !strings.Contains(img.String(), "ssd-q1 (ssd-q1.json)") {
		t.Errorf("plot: %v; the speculative panel names no ssd-q1 line", err)
	}
}

// TestSpecEaglet: the eaglet dialog with an EAGLE-3 head through the
// staged runtime gives a sane row beside the head's whole-model chain,
// with the device column of the plan's window (max-tokens-target-can-
// evaluate positions).
func TestSpecEaglet(t *testing.T) {
	p := smallModel(t, gguf.Q8_0)
	head := eagle3File(t)
	plan := eagletPlanFile(t, p, head, eagletDialog)
	dev := testDevice
	rep, err := Run(context.Background(), p, Options{Gen: 10, Reps: 1, Threads: []int{1}, DraftPath: head, K: []int{3}, Plans: []string{plan}, Device: &dev})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Speculative) != 2 || rep.Speculative[1].Dialog != "eaglet" {
		t.Fatalf("rows %+v, want the whole-model chain and eaglet", rep.Speculative)
	}
	pl, err := shard.ReadPlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range rep.Speculative {
		if !x.Sane || x.TokensPerWindow < 1 || x.TargetCallsPerToken <= 0 || x.TargetCallsPerToken > 1 || x.K != 3 || x.Drafter != "eagle3 "+head {
			t.Errorf("%q: %+v", x.Dialog, x)
		}
	}
	x := rep.Speculative[1]
	want, err := qnnpack.DialogSpec(pl, x.AcceptanceLength)
	if err != nil {
		t.Fatal(err)
	}
	w, err := qnnpack.EstimateSpec(dev, qnnpack.PlanWeightBytes(pl), want, 1)
	if err != nil {
		t.Fatal(err)
	}
	if x.Device == nil || x.Device.Positions != 8 || x.Device.TokensPerSec != w.TokensPerSec {
		t.Errorf("eaglet device %+v, want %+v", x.Device, w)
	}
	s := NewSuite([]*Report{rep}, nil)
	tb := validTable(t, s)
	if !strings.Contains(tb.String(), "| eaglet (eaglet.json) |") {
		t.Errorf("table:\n%s", tb.String())
	}
	t.Logf("\n%s", tb.String())
}

// TestSpecDialogsFault: a kernel fault on the timed engines shows in the
// sanity column of every speculative row, the staged dialogs' included.
func TestSpecDialogsFault(t *testing.T) {
	p := smallModel(t, gguf.Q8_0)
	f, err := ParseFault("blk.0.ffn_down.weight=1.5")
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Gen: 8, Reps: 1, Threads: []int{1}, DraftLayers: 1, K: []int{2},
		Plans: []string{specPlanFile(t, p, spdDialog), specPlanFile(t, p, ssdDialog)}, ForecastPath: forecastFile(t, 2, 256), Fault: f}
	rep, err := Run(context.Background(), p, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Speculative) != 3 || rep.Sane {
		t.Fatalf("%d rows, report sane %v", len(rep.Speculative), rep.Sane)
	}
	for _, x := range rep.Speculative {
		if x.Sane || !strings.Contains(x.SanityNote, "greedy differs from the reference") {
			t.Errorf("%q: sane %v (%s), want the reference's difference", x.Dialog, x.Sane, x.SanityNote)
		}
		if x.Device != nil {
			t.Errorf("%q: a device column without a device", x.Dialog)
		}
	}
	var tb bytes.Buffer
	if err := NewSuite([]*Report{rep}, nil).WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(tb.String(), "| NO: greedy differs"); got != 3 {
		t.Errorf("%d rows say NO, want 3:\n%s", got, tb.String())
	}
}

// TestSpecPlanRefused: a dialog bench cannot draft for is refused before
// anything is timed, naming the plan and what it needs.
func TestSpecPlanRefused(t *testing.T) {
	p := smallModel(t, gguf.Q8_0)
	spd, ssd := specPlanFile(t, p, spdDialog), specPlanFile(t, p, ssdDialog)
	basic := specPlanFile(t, p, shard.Dialog{Type: shard.Basic})
	eaglet := specPlanFile(t, p, shard.Dialog{Type: shard.Eaglet, DraftLen: 3, NBranches: 1, MaxTargetTokens: 4})
	fc := forecastFile(t, 2, 256)
	dev := testDevice
	for _, tc := range []struct {
		name string
		opt  Options
		want string
	}{
		{"spd without a draft", Options{Plans: []string{spd}}, "draft model"},
		{"ssd-q1 without forecast rows", Options{Plans: []string{ssd}}, "--forecast-embeddings"},
		{"wrong forecast rows", Options{Plans: []string{ssd}, ForecastPath: forecastFile(t, 3, 256)}, "forecast-token-count 2"},
		{"forecast rows without ssd-q1", Options{Plans: []string{spd}, DraftLayers: 1, ForecastPath: fc}, "no ssd-q1 plan"},
		{"forecast rows without a plan", Options{DraftLayers: 1, ForecastPath: fc}, "ssd-q1 plan"},
		{"basic", Options{Plans: []string{basic}}, "not speculative"},
		{"eaglet without a head", Options{Plans: []string{eaglet}, DraftLayers: 1}, "EAGLE-3 head"},
		{"device without speculation", Options{Device: &dev}, "device column"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opt
			o.Gen, o.Reps, o.Threads = 4, 1, []int{1}
			_, err := Run(context.Background(), p, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
