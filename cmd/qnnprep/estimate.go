package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
)

var estimateCmd = &command{
	Name:    "estimate",
	Usage:   "qnnprep estimate (--plan plan.json | --weights-gb G | --weights-bytes B) (--device FILE | --bandwidth GB/s --position-ms C --draft-step-ms D --host-ms H) [-k K] [--acceptance A] [--weight-fraction F] [--json]",
	Summary: "estimate speculative window time and tokens/s on a device: weights/bandwidth + c(K+1) + d(K-1) + host",
	Run:     runEstimate,
}

func runEstimate(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	planPath := fs.String("plan", "", "take the weight bytes from a plan: the sum of its stages' device bytes, in the container it was sized for (embedding table included); an spd, ssd-q1 or eaglet plan also gives the window (proposals, positions, draft steps)")
	gb := fs.Float64("weights-gb", 0, "weight bytes streamed per window, in GB (1e9)")
	bytes := fs.Int64("weights-bytes", 0, "weight bytes streamed per window")
	devFile := fs.String("device", "", "device profile JSON (name, bandwidth_gb_per_s, position_ms, draft_step_ms, host_ms)")
	bw := fs.Float64("bandwidth", 0, "memory bandwidth, GB/s")
	pos := fs.Float64("position-ms", 0, "target compute per verified position, ms")
	draft := fs.Float64("draft-step-ms", 0, "draft cost per proposed token, ms")
	host := fs.Float64("host-ms", 0, "host overhead per window, ms")
	k := fs.IntP("k", "k", 0, "draft tokens per window (0: no speculation; a plan with a speculative dialog gives its own)")
	acc := fs.Float64("acceptance", 0, "mean accepted draft tokens per window (the acceptance length speculate and bench --draft report)")
	frac := fs.Float64("weight-fraction", 1, "fraction of the weights kept (structured pruning), scales weights and per-position compute")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("no positional arguments expected")
	}
	weights := float64(*bytes)
	spec := qnnpack.ChainSpec(*k, *acc)
	if *planPath != "" {
		p, err := shard.ReadPlan(*planPath)
		if err != nil {
			return err
		}
		weights = qnnpack.PlanWeightBytes(p)
		// A speculative dialog fixes the window's shape (what bench
		// reports for the plan); -k may only repeat it.
		if p.Dialog.Speculative() {
			if spec, err = qnnpack.DialogSpec(p, *acc); err != nil {
				return err
			}
			if *k != 0 && *k != spec.K {
				return usageError("-k %d: plan %s's %s dialog proposes %d tokens per window", *k, *planPath, p.Dialog.Type, spec.K)
			}
		}
	}
	if *gb > 0 {
		weights = *gb * 1e9
	}
	if weights <= 0 {
		return usageError("give the weight bytes with --plan, --weights-gb or --weights-bytes")
	}
	dev := qnnpack.Device{Name: "flags", BandwidthGBps: *bw, PositionMs: *pos, DraftStepMs: *draft, HostMs: *host}
	if *devFile != "" {
		var err error
		if dev, err = qnnpack.ReadDevice(*devFile); err != nil {
			return err
		}
	}
	w, err := qnnpack.EstimateSpec(dev, weights, spec, *frac)
	if err != nil {
		return err
	}
	if *asJSON {
		printJSON(w)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "K\tpositions\tacceptance\tweights ms\tcompute ms\tdraft ms\thost ms\twindow ms\ttokens/window\ttokens/s\t")
	fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t\n", w.K, w.Positions, w.Acceptance, w.WeightsMs, w.ComputeMs, w.DraftMs, w.HostMs, w.WindowMs, w.TokensPerWin, w.TokensPerSec)
	return tw.Flush()
}
