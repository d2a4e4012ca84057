package peers

import (
	"fmt"
	"time"
)

// LlamaBenchRequest describes one llama.cpp timing run (see LlamaBench).
type LlamaBenchRequest struct {
	Threads   int     // ≤ 0 means 1
	DepthIDs  []int32 // context filled with these ids before timing (the depth)
	PromptIDs []int32 // pp: processed in one evaluation; empty skips pp
	Gen       int     // tg: tokens generated one decode at a time; 0 skips tg
	Reps      int     // timed repetitions after one untimed warm-up; ≤ 0 means 1
	// Timeout kills the node process when it runs longer (≤ 0: Timeout);
	// the error then wraps ErrTimedOut.
	Timeout time.Duration
}

// LlamaBenchResult holds the wall time of each timed repetition.
type LlamaBenchResult struct {
	PPSeconds []float64 `json:"pp_seconds"`
	TGSeconds []float64 `json:"tg_seconds"`
	PeakRSS   int64     `json:"max_rss_bytes"` // of the node process
	// Backend is the compute backend llama.cpp loaded, with the CPU
	// variant of ggml's dynamic backends ("CPU zen4", "CPU haswell"), and
	// CPU the processor it named (llama-bench's cpu_info); empty when the
	// peer does not say.
	Backend string `json:"backend,omitempty"`
	CPU     string `json:"cpu,omitempty"`
}

// LlamaBench times llama.cpp (node-llama-cpp's prebuilt CPU build, v0.4.0)
// on ggufPath the way llama-bench does: the context is filled with
// DepthIDs untimed, then each repetition times pp (PromptIDs in one
// evaluation, micro-batches of 512) and tg (Gen greedy tokens, one decode
// each) and erases its tokens back to the depth. Unlike llama-bench the
// tg time includes node-llama-cpp's per-token sampling and JavaScript
// overhead (small next to a 700M model's decode).
func LlamaBench(ggufPath string, req LlamaBenchRequest) (*LlamaBenchResult, error) {
	if len(req.PromptIDs) == 0 && req.Gen <= 0 {
		return nil, fmt.Errorf("peers: llama bench on %s: nothing to time", ggufPath)
	}
	reps := max(req.Reps, 1)
	var r LlamaBenchResult
	err := runNodeFor(req.Timeout, NodeLlamaCpp, "bench.mjs", map[string]any{
		"model": ggufPath, "threads": max(req.Threads, 1), "depth_ids": nonNil(req.DepthIDs),
		"prompt_ids": nonNil(req.PromptIDs), "n": max(req.Gen, 0), "reps": reps,
	}, &r)
	if err != nil {
		return nil, fmt.Errorf("peers: llama bench on %s: %w", ggufPath, err)
	}
	wantPP, wantTG := 0, 0
	if len(req.PromptIDs) > 0 {
		wantPP = reps
	}
	if req.Gen > 0 {
		wantTG = reps
	}
	if len(r.PPSeconds) != wantPP || len(r.TGSeconds) != wantTG {
		return nil, fmt.Errorf("peers: llama bench on %s: got %d pp and %d tg timings, want %d and %d", ggufPath, len(r.PPSeconds), len(r.TGSeconds), wantPP, wantTG)
	}
	for _, s := range append(r.PPSeconds, r.TGSeconds...) {
		if !(s > 0) {
			return nil, fmt.Errorf("peers: llama bench on %s: timing %v is not positive", ggufPath, s)
		}
	}
	return &r, nil
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}
