package main

import (
	"context"
	"fmt"
	"os"

	"github.com/qnnprep/qnnprep/shard"
)

var checkCmd = &command{
	Name:    "check",
	Usage:   "qnnprep check PLAN.json [--probe-prompt N] [--max-context-bytes SIZE] [--json]",
	Summary: "check a plan against Genie's I/O contract; exits 1 on any violation",
	Run:     runCheck,
}

func runCheck(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	probe := fs.Int("probe-prompt", 0, "prompt length the n_process/token-history numbers in messages assume (default: the plan's)")
	maxBytes := fs.String("max-context-bytes", "2GiB", "largest context binary allowed")
	asJSON := fs.Bool("json", false, "print the violations as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("want one PLAN.json (written by qnnprep plan)")
	}
	limit, err := parseBytes(*maxBytes)
	if err != nil {
		return usageError("--max-context-bytes: %v", err)
	}
	p, err := shard.ReadPlan(fs.Arg(0))
	if err != nil {
		return err
	}
	vs := shard.Check(p, shard.CheckEnv{ProbePromptTokens: *probe, MaxContextBytes: limit})
	if *asJSON {
		if vs == nil {
			vs = []shard.Violation{}
		}
		printJSON(vs)
	} else {
		for _, v := range vs {
			where := v.Graph
			if v.Tensor != "" {
				where += " " + v.Tensor
			}
			if where == "" {
				where = "plan"
			}
			fmt.Printf("%s  %s\n  %s\n  fix: %s\n", v.Rule, where, v.Message, v.Fix)
		}
		if len(vs) == 0 {
			fmt.Printf("%s: %d stages, %d graphs: no violations\n", fs.Arg(0), len(p.Stages), len(p.Graphs))
		} else {
			fmt.Fprintf(os.Stderr, "%s: %d violation(s)\n", fs.Arg(0), len(vs))
		}
	}
	if len(vs) > 0 {
		return exitError{1}
	}
	return nil
}
