package qnnpack

import (
	"math"
	"strings"
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
			w, err := estimate(phone27B, 3.80e9, 2, 0.72, c.fraction)
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
	w, err := estimate(phone27B, 3.80e9, 0, 0, 1)
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
		if _, err := estimate(phone27B, 1e9, bad.k, bad.acc, bad.frac); err == nil {
			t.Errorf("estimate(k=%d, acc=%g, frac=%g) accepted", bad.k, bad.acc, bad.frac)
		}
	}
	if _, err := estimate(Device{}, 1e9, 1, 0, 1); err == nil {
		t.Error("zero bandwidth accepted")
	}
}

func TestParseDevice(t *testing.T) {
	d, err := parseDevice([]byte(`{"name":"npu","bandwidth_gb_per_s":20,"position_ms":1.5,"draft_step_ms":0.8,"host_ms":2}`), "npu.json")
	if err != nil || d.BandwidthGBps != 20 || d.HostMs != 2 {
		t.Fatalf("got %+v, %v", d, err)
	}
	for in, want := range map[string]string{
		`{"name":"npu","bandwith_gb_per_s":20}`: `npu.json: json: unknown field "bandwith_gb_per_s"`,
		`{"bandwidth_gb_per_s":0}`:              `npu.json: device: bandwidth must be positive`,
		`{"bandwidth_gb_per_s":1,"host_ms":-1}`: `npu.json: device: times must not be negative`,
		`{"bandwidth_gb_per_s":1} {}`:           `npu.json: unexpected data after the JSON object`,
		`[1]`:                                   `npu.json: json: cannot unmarshal array`,
		``:                                      `npu.json: EOF`,
	} {
		if _, err := parseDevice([]byte(in), "npu.json"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", in, err, want)
		}
	}
}

// FuzzParseDevice: no input panics; every error names the file; what
// parses is a valid device.
func FuzzParseDevice(f *testing.F) {
	f.Add([]byte(`{"name":"npu","bandwidth_gb_per_s":20,"position_ms":1.5,"draft_step_ms":0.8,"host_ms":2}`))
	f.Add([]byte(`{"bandwidth_gb_per_s":1e308,"position_ms":1e-320}`))
	f.Add([]byte(`{"bandwidth_gb_per_s":1}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseDevice(b, "dev.json")
		if err != nil {
			if !strings.Contains(err.Error(), "dev.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := d.validate(); err != nil {
			t.Fatalf("parsed an invalid device %+v: %v", d, err)
		}
	})
}

// estimate models one window of chained speculative decoding (a draft
// model or head proposing K tokens in a row) on d: EstimateSpec of
// ChainSpec(k, acceptance). K = 0 is plain decoding: one position, no
// draft. weightFraction scales both the weight bytes and the per-position
// compute, as pruning a bandwidth-bound model does (1 = dense).
func estimate(d Device, weightBytes float64, k int, acceptance, weightFraction float64) (Window, error) {
	return EstimateSpec(d, weightBytes, ChainSpec(k, acceptance), weightFraction)
}
