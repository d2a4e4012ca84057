package peers

import (
	"fmt"
	"math"
)

// LlamaGreedy evaluates promptIDs with llama.cpp (node-llama-cpp's prebuilt
// CPU build, v0.4.0) and returns the next n greedy tokens. The ids are used
// as given: no tokenization and no BOS is added. Generation does not stop
// at an end-of-generation token: exactly n ids come back, so fixed-length
// comparisons hold whatever the model emits. threads ≤ 0 means 1.
func LlamaGreedy(ggufPath string, promptIDs []int32, n int, threads int) ([]int32, error) {
	if len(promptIDs) == 0 {
		return nil, fmt.Errorf("peers: llama greedy on %s: empty prompt", ggufPath)
	}
	var r struct{ IDs []int32 }
	err := runNode(NodeLlamaCpp, "llama.mjs", map[string]any{
		"op": "greedy", "model": ggufPath, "ids": promptIDs, "n": n, "threads": threads,
	}, &r)
	if err != nil {
		return nil, fmt.Errorf("peers: llama greedy on %s: %w", ggufPath, err)
	}
	if len(r.IDs) != n {
		return r.IDs, fmt.Errorf("peers: llama greedy on %s: got %d tokens, want %d", ggufPath, len(r.IDs), n)
	}
	return r.IDs, nil
}

// LlamaLogits evaluates ids with llama.cpp in one teacher-forced pass and
// returns, for every position i, the logits predicting token i+1:
// len(result) == len(ids), each row as long as the model's vocabulary.
//
// node-llama-cpp does not expose raw logits, only the softmax
// probabilities of the whole vocabulary (computed in float32 from the raw
// logits when sampling at temperature 0). The rows are therefore
// logit − max(logit): exact up to that per-row constant and the rounding of
// a float32 softmax (about 1e-6 absolute near the top), with −Inf where a
// probability underflowed (logit more than about 100 below the maximum).
// Compare them after subtracting each row's maximum, or as log-softmax.
func LlamaLogits(ggufPath string, ids []int32) ([][]float32, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("peers: llama logits on %s: no tokens", ggufPath)
	}
	var r struct{ Logits [][]*float64 }
	err := runNode(NodeLlamaCpp, "llama.mjs", map[string]any{
		"op": "logits", "model": ggufPath, "ids": ids, "threads": 1,
	}, &r)
	if err != nil {
		return nil, fmt.Errorf("peers: llama logits on %s: %w", ggufPath, err)
	}
	if len(r.Logits) != len(ids) {
		return nil, fmt.Errorf("peers: llama logits on %s: got %d rows, want %d", ggufPath, len(r.Logits), len(ids))
	}
	out := make([][]float32, len(r.Logits))
	for i, row := range r.Logits {
		out[i] = make([]float32, len(row))
		for j, v := range row {
			if v == nil {
				out[i][j] = float32(math.Inf(-1))
			} else {
				out[i][j] = float32(*v)
			}
		}
	}
	return out, nil
}

// LlamaLoads reports whether llama.cpp loads the GGUF file and evaluates one
// token (the file's BOS, or token 0 when it has none) without error.
func LlamaLoads(ggufPath string) error {
	var r struct{ IDs []int32 }
	err := runNode(NodeLlamaCpp, "llama.mjs", map[string]any{
		"op": "load", "model": ggufPath, "threads": 1,
	}, &r)
	if err != nil {
		return fmt.Errorf("peers: llama.cpp cannot load %s: %w", ggufPath, err)
	}
	if len(r.IDs) != 1 {
		return fmt.Errorf("peers: llama.cpp on %s: evaluation gave no token", ggufPath)
	}
	return nil
}
