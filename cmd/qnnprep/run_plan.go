package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

// newStagedDecoder is the runtime's staged executor as a golden.Decoder,
// the form build's verify step takes.
func newStagedDecoder(e *runtime.Engine, p *shard.Plan) (golden.Decoder, error) {
	return runtime.NewStaged(e, p)
}

// planGreedy returns runGreedy's counterpart for `run --plan planPath`.
func planGreedy(planPath string) func(context.Context, *runtime.Engine, []int32, int, bool, string) (*runResult, error) {
	return func(ctx context.Context, e *runtime.Engine, prompt []int32, n int, stopEOS bool, logitsPath string) (*runResult, error) {
		return runPlanGreedy(ctx, e, planPath, prompt, n, stopEOS, logitsPath)
	}
}

// runPlanGreedy is `run --plan`: greedy decoding through the plan's stages
// with the staged executor (each stage one graph call over the plan's I/O
// tensors, Genie's KV manager between calls). It reports like runGreedy and
// prints the graph calls per variant on stderr.
func runPlanGreedy(ctx context.Context, e *runtime.Engine, planPath string, prompt []int32, n int, stopEOS bool, logitsPath string) (*runResult, error) {
	p, err := shard.ReadPlan(planPath)
	if err != nil {
		return nil, err
	}
	s, err := runtime.NewStaged(e, p)
	if err != nil {
		return nil, fmt.Errorf("--plan %s: %w", planPath, err)
	}
	res := &runResult{Prompt: prompt}
	var lw *bufio.Writer
	var f *atomicfile.File
	if logitsPath != "" {
		if f, err = atomicfile.Create(logitsPath); err != nil {
			return nil, err
		}
		defer f.Abort() // a no-op after Commit
		lw = bufio.NewWriter(f)
	}
	eos := int32(e.Config().EOS)
	var werr error
	start := time.Now()
	last := start
	buf := make([]byte, 4)
	_, err = s.Generate(ctx, prompt, n, func(st runtime.Step) bool {
		now := time.Now()
		if st.Index == 0 {
			res.PromptSeconds = now.Sub(start).Seconds()
		} else {
			res.GenSeconds += now.Sub(last).Seconds()
		}
		last = now
		res.Generated = append(res.Generated, st.Token)
		if lw != nil && werr == nil {
			for _, v := range st.Logits {
				binary.LittleEndian.PutUint32(buf, math.Float32bits(v))
				if _, werr = lw.Write(buf); werr != nil {
					break
				}
			}
		}
		if stopEOS && eos >= 0 && st.Token == eos {
			res.StoppedAtEOS = true
			return false
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("--plan %s: %w", planPath, err)
	}
	if werr != nil {
		return nil, fmt.Errorf("%s: %w", logitsPath, werr)
	}
	if lw != nil {
		if err := lw.Flush(); err != nil {
			return nil, fmt.Errorf("%s: %w", logitsPath, err)
		}
		if err := f.Commit(); err != nil {
			return nil, err
		}
	}
	if res.PromptSeconds > 0 {
		res.PromptTokensPerSec = float64(len(prompt)) / res.PromptSeconds
	}
	if steps := len(res.Generated) - 1; steps > 0 && res.GenSeconds > 0 {
		res.GenTokensPerSec = float64(steps) / res.GenSeconds
	}
	var calls []string
	for _, c := range s.Calls() {
		calls = append(calls, fmt.Sprintf("%d on AR %d CL %d", c.Calls, c.AR, c.CL))
	}
	fmt.Fprintf(os.Stderr, "plan %s: %d stages; graph calls: %s\n", planPath, len(p.Stages), strings.Join(calls, ", "))
	return res, nil
}
