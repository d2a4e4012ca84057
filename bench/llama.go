package bench

import (
	"context"
	"errors"
	"fmt"
	"os"

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

// llamaRunner is how a model's llama.cpp runs are made: the peer, the
// llama-bench binary ("": the installed one) in its own directory dir
// (removed by close), and, once a run timed out, where (runLlama).
type llamaRunner struct {
	peer, bin, dir string
	gaveUp         string
}

// newLlamaRunner resolves the peer and, with Options.LlamaCPU, prepares
// in a temporary directory a llama-bench offered only that CPU backend
// variant.
func (o *Options) newLlamaRunner() (*llamaRunner, error) {
	peer, err := o.llamaPeer()
	if err != nil {
		return nil, err
	}
	lr := &llamaRunner{peer: peer}
	if o.LlamaCPU == "" {
		return lr, nil
	}
	if peer != peers.LlamaBenchBin {
		return nil, fmt.Errorf("bench: llama.cpp CPU variant %q: only llama-bench can be given one, not %s", o.LlamaCPU, peer)
	}
	if lr.dir, err = os.MkdirTemp("", "qnnprep-llama-bench-"); err != nil {
		return nil, err
	}
	if lr.bin, err = peers.LlamaBenchVariant(lr.dir, o.LlamaCPU); err != nil {
		lr.close()
		return nil, err
	}
	return lr, nil
}

func (lr *llamaRunner) close() {
	if lr.dir != "" {
		os.RemoveAll(lr.dir)
	}
}

// runLlama times llama.cpp through peer at every depth with th threads.
// Run calls it right after qnnprep's runs for the same thread count: the
// machine's speed drifts over minutes, and a ratio is only as good as the
// closeness in time of its two sides.
//
// A failed or timed-out peer run does not stop the benchmark: its rows
// come back without timings and with the reason (Result.Error), and what
// qnnprep measured is kept. After a timeout lr.gaveUp says where, and the
// peer's remaining runs on this model are not started (each would wait as
// long again); they come back as rows that say so.
func (o *Options) runLlama(ctx context.Context, lr *llamaRunner, path string, th int, fill, prompt []int32) []Result {
	peer, gaveUp := lr.peer, &lr.gaveUp
	var rs []Result
	for _, d := range o.Depths {
		if ctx.Err() != nil {
			return rs
		}
		if *gaveUp != "" {
			rs = append(rs, o.failedRows("llama.cpp", peer, d, th, "not run: llama.cpp "+*gaveUp, false)...)
			continue
		}
		o.logf("llama.cpp (%s): depth %d, %d threads", peer, d, th)
		l0 := LoadAvg()[0]
		var lb *peers.LlamaBenchResult
		var err error
		if peer == peers.LlamaBenchBin {
			lb, err = peers.RunLlamaBench(path, peers.LlamaBenchArgs{
				Threads: th, Prompt: o.Prompt, Gen: o.Gen, Depth: d, Reps: o.Reps, Timeout: o.LlamaTimeout, Bin: lr.bin,
			})
			if want := "CPU " + o.LlamaCPU; err == nil && o.LlamaCPU != "" && lb.Backend != want {
				err = fmt.Errorf("llama-bench loaded backend %q, not %q", lb.Backend, want)
			}
		} else {
			lb, err = peers.LlamaBench(path, peers.LlamaBenchRequest{
				Threads: th, DepthIDs: fill[:d], PromptIDs: prompt[:o.Prompt], Gen: o.Gen, Reps: o.Reps, Timeout: o.LlamaTimeout,
			})
		}
		if err != nil {
			timedOut := errors.Is(err, peers.ErrTimedOut)
			o.logf("llama.cpp (%s): depth %d, %d threads: %v", peer, d, th, err)
			rs = append(rs, o.failedRows("llama.cpp", peer, d, th, err.Error(), timedOut)...)
			if timedOut {
				*gaveUp = fmt.Sprintf("timed out at depth %d with %d threads", d, th)
			}
			continue
		}
		load := (l0 + LoadAvg()[0]) / 2
		if o.Prompt > 0 {
			rs = append(rs, llamaResult(peer, lb.Backend, "pp", o.Prompt, d, th, lb.PPSeconds, load, lb.PeakRSS))
		}
		if o.Gen > 0 {
			rs = append(rs, llamaResult(peer, lb.Backend, "tg", o.Gen, d, th, lb.TGSeconds, load, lb.PeakRSS))
		}
	}
	return rs
}

// failedRows returns the rows of a run that gave no timings (a llama.cpp
// peer's, peer naming it, or a qnnprep model's): no samples, the reason
// in Error.
func (o *Options) failedRows(engine, peer string, depth, threads int, reason string, timedOut bool) []Result {
	var rs []Result
	for _, t := range []struct {
		kind   string
		tokens int
	}{{"pp", o.Prompt}, {"tg", o.Gen}} {
		if t.tokens > 0 {
			rs = append(rs, Result{Engine: engine, Peer: peer, Test: fmt.Sprintf("%s%d", t.kind, t.tokens), Kind: t.kind, Tokens: t.tokens,
				Depth: depth, Threads: threads, Samples: []float64{}, Load: LoadAvg()[0], Error: reason, TimedOut: timedOut})
		}
	}
	return rs
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
