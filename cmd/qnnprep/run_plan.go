package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

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
	res, err := greedy(ctx, s, int32(e.Config().EOS), prompt, n, stopEOS, logitsPath)
	if err != nil {
		return nil, fmt.Errorf("--plan %s: %w", planPath, err)
	}
	var calls []string
	for _, c := range s.Calls() {
		calls = append(calls, fmt.Sprintf("%d on AR %d CL %d", c.Calls, c.AR, c.CL))
	}
	fmt.Fprintf(os.Stderr, "plan %s: %d stages; graph calls: %s\n", planPath, len(p.Stages), strings.Join(calls, ", "))
	return res, nil
}
