package bench

import (
	"context"
	"fmt"

	"github.com/qnnprep/qnnprep/internal/peers"
)

// llamaPeer resolves Options.LlamaPeer to the peer that times llama.cpp
// (peers.LlamaBenchBin or peers.NodeLlamaCpp), checking that it is there.
func (o *Options) llamaPeer() (string, error) {
	switch o.LlamaPeer {
	case "", LlamaPeerAuto:
		if peers.Check(peers.LlamaBenchBin) == nil {
			return peers.LlamaBenchBin, nil
		}
		if err := peers.Check(peers.NodeLlamaCpp); err != nil {
			return "", fmt.Errorf("bench: --llama: neither llama-bench nor node-llama-cpp is installed: %w", err)
		}
		return peers.NodeLlamaCpp, nil
	case LlamaPeerBench:
		if err := peers.Check(peers.LlamaBenchBin); err != nil {
			return "", fmt.Errorf("bench: --llama-peer llama-bench: %w", err)
		}
		return peers.LlamaBenchBin, nil
	case LlamaPeerNode:
		if err := peers.Check(peers.NodeLlamaCpp); err != nil {
			return "", fmt.Errorf("bench: --llama-peer node: %w", err)
		}
		return peers.NodeLlamaCpp, nil
	}
	return "", fmt.Errorf("bench: llama peer %q: want auto, llama-bench or node", o.LlamaPeer)
}

// runLlama times llama.cpp through peer at every depth with th threads.
// Run calls it right after qnnprep's runs for the same thread count: the
// machine's speed drifts over minutes, and a ratio is only as good as the
// closeness in time of its two sides.
func (o *Options) runLlama(ctx context.Context, peer, path string, th int, fill, prompt []int32) ([]Result, error) {
	var rs []Result
	for _, d := range o.Depths {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		o.logf("llama.cpp (%s): depth %d, %d threads", peer, d, th)
		l0 := LoadAvg()[0]
		var lb *peers.LlamaBenchResult
		var err error
		if peer == peers.LlamaBenchBin {
			lb, err = peers.RunLlamaBench(path, peers.LlamaBenchArgs{
				Threads: th, Prompt: o.Prompt, Gen: o.Gen, Depth: d, Reps: o.Reps,
			})
		} else {
			lb, err = peers.LlamaBench(path, peers.LlamaBenchRequest{
				Threads: th, DepthIDs: fill[:d], PromptIDs: prompt[:o.Prompt], Gen: o.Gen, Reps: o.Reps,
			})
		}
		if err != nil {
			return nil, err
		}
		load := (l0 + LoadAvg()[0]) / 2
		if o.Prompt > 0 {
			rs = append(rs, llamaResult(peer, lb.Backend, "pp", o.Prompt, d, th, lb.PPSeconds, load, lb.PeakRSS))
		}
		if o.Gen > 0 {
			rs = append(rs, llamaResult(peer, lb.Backend, "tg", o.Gen, d, th, lb.TGSeconds, load, lb.PeakRSS))
		}
	}
	return rs, nil
}

func llamaResult(peer, backend, kind string, tokens, depth, threads int, secs []float64, load float64, rss int64) Result {
	r := Result{Engine: "llama.cpp", Peer: peer, Backend: backend, Test: fmt.Sprintf("%s%d", kind, tokens), Kind: kind, Tokens: tokens, Depth: depth, Threads: threads, Load: load, PeakRSS: rss}
	for _, s := range secs {
		r.Samples = append(r.Samples, float64(tokens)/s)
	}
	r.TokensPerSec, r.Stddev = meanStd(r.Samples)
	return r
}

// ratios fills VsLlama of every qnnprep row that has a llama.cpp twin.
func ratios(rs []Result) {
	type key struct {
		test           string
		depth, threads int
	}
	ll := map[key]float64{}
	for _, r := range rs {
		if r.Engine == "llama.cpp" {
			ll[key{r.Test, r.Depth, r.Threads}] = r.TokensPerSec
		}
	}
	for i := range rs {
		if v := ll[key{rs[i].Test, rs[i].Depth, rs[i].Threads}]; rs[i].Engine == "qnnprep" && v > 0 {
			rs[i].VsLlama = rs[i].TokensPerSec / v
		}
	}
}
