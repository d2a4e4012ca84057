package qnnpack

import (
	"math"
	"testing"

	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

// DialogSpec prices each dialog's window as its steps run on the device:
// ssd-q1 evaluates its whole tree and forecast rows in one target call
// without draft steps, spd chains draft-len drafts, eaglet's target
// evaluates up to max-tokens-target-can-evaluate positions.
func TestDialogSpec(t *testing.T) {
	cfg := fakesdk.ModelConfig(4)
	for _, tc := range []struct {
		name   string
		dialog shard.Dialog
		want   Spec
	}{
		{"ssd-q1 [2 2]", shard.Dialog{Type: shard.SSD, ForecastTokenCount: 2, Branches: []int{2, 2}}, Spec{K: 6, Positions: 7 * 3, Acceptance: 0.5}},
		{"ssd-q1 [3]", shard.Dialog{Type: shard.SSD, ForecastTokenCount: 1, Branches: []int{3}}, Spec{K: 3, Positions: 4 * 2, Acceptance: 0.5}},
		{"spd", shard.Dialog{Type: shard.SPD, DraftLen: 4}, Spec{K: 4, Positions: 5, DraftSteps: 3, Acceptance: 0.5}},
		{"eaglet", shard.Dialog{Type: shard.Eaglet, DraftLen: 3, NBranches: 2, MaxTargetTokens: 12}, Spec{K: 3, Positions: 12, DraftSteps: 2, Acceptance: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPlan(t, cfg, "m", shard.Options{AR: []int{32, 1}, CL: []int{128}, Dialog: tc.dialog})
			got, err := DialogSpec(p, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("spec %+v, want %+v", got, tc.want)
			}
			w, err := EstimateSpec(phone27B, PlanWeightBytes(p), got, 1)
			if err != nil {
				t.Fatal(err)
			}
			wantMs := PlanWeightBytes(p)/33.5e9*1e3 + 29.4*float64(tc.want.Positions) + 10.6*float64(tc.want.DraftSteps) + 27.9
			if math.Abs(w.WindowMs-wantMs) > 1e-9 || math.Abs(w.TokensPerSec-1.5/(wantMs/1e3)) > 1e-9 {
				t.Errorf("window %+v, want %.3f ms", w, wantMs)
			}
		})
	}
	for _, d := range []shard.Dialog{{Type: shard.Basic}, {Type: shard.LADE, Window: 2, NGram: 3, GCap: 2}} {
		p := testPlan(t, cfg, "m", shard.Options{AR: []int{32, 1}, CL: []int{128}, Dialog: d})
		if _, err := DialogSpec(p, 0); err == nil {
			t.Errorf("dialog %s: no error", d.Type)
		}
	}
}

// PlanWeightBytes is what estimate --plan streams: every stage's device
// bytes (testPlan: 4 layers, embedding and head of 1 MiB each).
func TestPlanWeightBytes(t *testing.T) {
	p := testPlan(t, fakesdk.ModelConfig(4), "m", shard.Options{})
	if got, want := PlanWeightBytes(p), float64(6<<20); got != want {
		t.Errorf("%g bytes, want %g", got, want)
	}
}

func TestEstimateSpecErrors(t *testing.T) {
	for _, s := range []Spec{
		{K: 2, Positions: 3, Acceptance: 2.5},
		{K: 2, Positions: 0, Acceptance: 1},
		{K: 2, Positions: 3, DraftSteps: -1},
		{K: -1, Positions: 1},
	} {
		if _, err := EstimateSpec(phone27B, 1e9, s, 1); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	if _, err := EstimateSpec(phone27B, -1, ChainSpec(1, 0), 1); err == nil {
		t.Error("negative weight bytes accepted")
	}
}
