package qnnpack

import (
	"fmt"

	"github.com/qnnprep/qnnprep/shard"
)

// Spec is the shape of one speculative window, as a decode measured it or
// a plan's dialog declares it: what the device pays per window and what
// it gets for it.
type Spec struct {
	K          int     // draft tokens proposed per window
	Positions  int     // target positions evaluated per window (one weight pass)
	DraftSteps int     // draft steps per window
	Acceptance float64 // mean draft tokens accepted per window, in [0, K]
}

// ChainSpec is a draft model or head proposing a chain of k tokens: the
// target verifies them plus the token it already has (k+1 positions), and
// the draft runs k−1 steps, its first proposal coming out of the previous
// window's last step. k = 0 is plain decoding.
func ChainSpec(k int, acceptance float64) Spec {
	return Spec{K: k, Positions: k + 1, DraftSteps: max(k-1, 0), Acceptance: acceptance}
}

// DialogSpec is the window of p's speculative dialog on the device, with
// the given measured acceptance:
//
//   - spd and eaglet: a chain of draft-len (ChainSpec), except that the
//     target evaluates eaglet's max-tokens-target-can-evaluate positions;
//   - ssd-q1: the draft tree's nodes − 1 proposals and their forecast rows,
//     nodes × (1 + len(branches)) positions in the target's own call, and
//     no draft steps (the forecast tokens draft inside the target call).
//
// Basic and lade plans have no such window and are errors.
func DialogSpec(p *shard.Plan, acceptance float64) (Spec, error) {
	d := &p.Dialog
	switch d.Type {
	case shard.SPD:
		return ChainSpec(d.DraftLen, acceptance), nil
	case shard.Eaglet:
		s := ChainSpec(d.DraftLen, acceptance)
		s.Positions = max(d.StepTokens, s.Positions)
		return s, nil
	case shard.SSD:
		return Spec{K: d.Nodes - 1, Positions: d.StepTokens, Acceptance: acceptance}, nil
	}
	return Spec{}, fmt.Errorf("estimate: plan %s: dialog %q has no speculative window (want spd, ssd-q1 or eaglet)", p.Model.Name, d.Type)
}

// PlanWeightBytes is the weight bytes a window streams on the device: the
// sum of p's stages' device bytes, in the container it was sized for
// (embedding table included).
func PlanWeightBytes(p *shard.Plan) float64 {
	var b float64
	for _, st := range p.Stages {
		b += float64(st.Bytes)
	}
	return b
}

// EstimateSpec models one speculative window of shape s on d:
//
//	window = weights/bandwidth + c·positions + d·draft steps + host
//
// One weight pass verifies all positions; each window yields
// 1 + acceptance tokens. weightFraction scales both the weight bytes and
// the per-position compute, as pruning a bandwidth-bound model does
// (1 = dense).
func EstimateSpec(d Device, weightBytes float64, s Spec, weightFraction float64) (Window, error) {
	if err := d.validate(); err != nil {
		return Window{}, err
	}
	switch {
	case s.K < 0 || s.Acceptance < 0 || s.Acceptance > float64(s.K):
		return Window{}, fmt.Errorf("estimate: acceptance %.3g must lie in [0, K=%d]", s.Acceptance, s.K)
	case s.Positions < 1 || s.DraftSteps < 0:
		return Window{}, fmt.Errorf("estimate: %d positions and %d draft steps per window: want at least 1 and 0", s.Positions, s.DraftSteps)
	case weightBytes < 0:
		return Window{}, fmt.Errorf("estimate: %g weight bytes is negative", weightBytes)
	case weightFraction <= 0 || weightFraction > 1:
		return Window{}, fmt.Errorf("estimate: weight fraction %.3g must lie in (0, 1]", weightFraction)
	}
	w := Window{K: s.K, Acceptance: s.Acceptance, Positions: s.Positions, DraftSteps: s.DraftSteps, HostMs: d.HostMs}
	w.WeightsMs = weightBytes * weightFraction / (d.BandwidthGBps * 1e9) * 1e3
	w.ComputeMs = d.PositionMs * weightFraction * float64(s.Positions)
	w.DraftMs = d.DraftStepMs * float64(s.DraftSteps)
	w.WindowMs = w.WeightsMs + w.ComputeMs + w.DraftMs + w.HostMs
	w.TokensPerWin = 1 + s.Acceptance
	w.TokensPerSec = w.TokensPerWin / (w.WindowMs / 1e3)
	return w, nil
}
