package qnnpack

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// Device describes what limits decode speed on a target: the bandwidth that
// streams the weights once per window, the compute per verified position,
// the draft model's cost per proposed token, and fixed host overhead.
type Device struct {
	Name          string  `json:"name"`
	BandwidthGBps float64 `json:"bandwidth_gb_per_s"` // weight streaming, GB/s (1e9 B/s)
	PositionMs    float64 `json:"position_ms"`        // target compute per position in the window
	DraftStepMs   float64 `json:"draft_step_ms"`      // one draft step (proposes one token)
	HostMs        float64 `json:"host_ms"`            // per window: sampling, KV bookkeeping, I/O
}

// ReadDevice reads a device profile JSON file.
func ReadDevice(path string) (Device, error) {
	var d Device
	b, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("device profile %s: %w", path, err)
	}
	return d, d.validate()
}

func (d Device) validate() error {
	switch {
	case d.BandwidthGBps <= 0:
		return errors.New("device: bandwidth must be positive")
	case d.PositionMs < 0 || d.DraftStepMs < 0 || d.HostMs < 0:
		return errors.New("device: times must not be negative")
	}
	return nil
}

// Window is the estimate for one speculative window.
type Window struct {
	K            int     `json:"k"`          // draft tokens proposed per window
	Acceptance   float64 `json:"acceptance"` // mean accepted draft tokens per window
	WeightsMs    float64 `json:"weights_ms"` // weights / bandwidth
	ComputeMs    float64 `json:"compute_ms"` // c·(K+1)
	DraftMs      float64 `json:"draft_ms"`   // d·(K−1)
	HostMs       float64 `json:"host_ms"`    // host overhead
	WindowMs     float64 `json:"window_ms"`  // the sum
	TokensPerWin float64 `json:"tokens_per_window"`
	TokensPerSec float64 `json:"tokens_per_s"`
}

// Estimate models one window of speculative decoding on d:
//
//	window(K) = weights/bandwidth + c·(K+1) + d·(K−1) + host
//
// The target verifies K drafts plus the token it already has (K+1
// positions, one weight pass); the draft runs K−1 extra steps because its
// first proposal comes out of the previous window's last step. Each window
// yields 1 + acceptance tokens. K = 0 is plain decoding: one position, no
// draft. weightFraction scales both the weight bytes and the per-position
// compute, as pruning a bandwidth-bound model does (1 = dense).
func Estimate(d Device, weightBytes float64, k int, acceptance, weightFraction float64) (Window, error) {
	if err := d.validate(); err != nil {
		return Window{}, err
	}
	if k < 0 || acceptance < 0 || acceptance > float64(k) {
		return Window{}, fmt.Errorf("estimate: acceptance %.3g must lie in [0, K=%d]", acceptance, k)
	}
	if weightFraction <= 0 || weightFraction > 1 {
		return Window{}, fmt.Errorf("estimate: weight fraction %.3g must lie in (0, 1]", weightFraction)
	}
	w := Window{K: k, Acceptance: acceptance, HostMs: d.HostMs}
	w.WeightsMs = weightBytes * weightFraction / (d.BandwidthGBps * 1e9) * 1e3
	w.ComputeMs = d.PositionMs * weightFraction * float64(k+1)
	if k > 1 {
		w.DraftMs = d.DraftStepMs * float64(k-1)
	}
	w.WindowMs = w.WeightsMs + w.ComputeMs + w.DraftMs + w.HostMs
	w.TokensPerWin = 1 + acceptance
	w.TokensPerSec = w.TokensPerWin / (w.WindowMs / 1e3)
	return w, nil
}
