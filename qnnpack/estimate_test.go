package qnnpack

import (
	"math"
	"testing"
)

// The published 1-bit 27B build on a phone NPU: 3.80 GB of weights at
// 33.5 GB/s, 29.4 ms per position, 10.6 ms per draft step, 27.9 ms host,
// K = 2 with a mean acceptance of 0.72 drafts per window.
var phone27B = Device{Name: "phone-npu-27b-q1", BandwidthGBps: 33.5, PositionMs: 29.4, DraftStepMs: 10.6, HostMs: 27.9}

func TestEstimatePublishedBuild(t *testing.T) {
	cases := []struct {
		name       string
		fraction   float64
		wantWindow float64
		wantTokS   float64
	}{
		{"dense", 1, 240.0, 7.18},
		{"pruned to 2/3 of the weights", 2.0 / 3, 0, 9.95},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := Estimate(phone27B, 3.80e9, 2, 0.72, c.fraction)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantWindow != 0 && math.Abs(w.WindowMs-c.wantWindow)/c.wantWindow > 0.01 {
				t.Errorf("window = %.2f ms, want %.1f ± 1%%", w.WindowMs, c.wantWindow)
			}
			if math.Abs(w.TokensPerSec-c.wantTokS)/c.wantTokS > 0.01 {
				t.Errorf("tokens/s = %.3f, want %.2f ± 1%%", w.TokensPerSec, c.wantTokS)
			}
		})
	}
}

func TestEstimateTermsAndErrors(t *testing.T) {
	w, err := Estimate(phone27B, 3.80e9, 0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Plain decoding: one weight pass, one position, no draft.
	if w.DraftMs != 0 || w.ComputeMs != 29.4 || w.TokensPerWin != 1 {
		t.Errorf("K=0 window = %+v", w)
	}
	for _, bad := range []struct {
		k         int
		acc, frac float64
	}{{2, 3, 1}, {-1, 0, 1}, {2, 0.5, 0}, {2, 0.5, 1.5}} {
		if _, err := Estimate(phone27B, 1e9, bad.k, bad.acc, bad.frac); err == nil {
			t.Errorf("Estimate(k=%d, acc=%g, frac=%g) accepted", bad.k, bad.acc, bad.frac)
		}
	}
	if _, err := Estimate(Device{}, 1e9, 1, 0, 1); err == nil {
		t.Error("zero bandwidth accepted")
	}
}
