package qnnpack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// ReadDevice reads a device profile JSON file (see parseDevice).
func ReadDevice(path string) (Device, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Device{}, err
	}
	return parseDevice(b, path)
}

// parseDevice parses a device profile: one JSON object with Device's
// fields and no others, so that a misspelt key is an error rather than a
// zero. Errors name the file, name.
func parseDevice(b []byte, name string) (Device, error) {
	var d Device
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Device{}, fmt.Errorf("device profile %s: %w", name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Device{}, fmt.Errorf("device profile %s: unexpected data after the JSON object", name)
	}
	if err := d.validate(); err != nil {
		return Device{}, fmt.Errorf("device profile %s: %w", name, err)
	}
	return d, nil
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
	K            int     `json:"k"`           // draft tokens proposed per window
	Acceptance   float64 `json:"acceptance"`  // mean accepted draft tokens per window
	Positions    int     `json:"positions"`   // target positions evaluated per window
	DraftSteps   int     `json:"draft_steps"` // draft steps per window
	WeightsMs    float64 `json:"weights_ms"`  // weights / bandwidth
	ComputeMs    float64 `json:"compute_ms"`  // c·positions
	DraftMs      float64 `json:"draft_ms"`    // d·draft steps
	HostMs       float64 `json:"host_ms"`     // host overhead
	WindowMs     float64 `json:"window_ms"`   // the sum
	TokensPerWin float64 `json:"tokens_per_window"`
	TokensPerSec float64 `json:"tokens_per_s"`
}
