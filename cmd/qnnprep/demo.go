package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/qnnprep/qnnprep/pipeline"
)

var demoCmd = &command{
	Name:    "demo",
	Usage:   "qnnprep demo [--model DIR] [--keep DIR] [--stages N] [-n TOKENS]",
	Summary: "build small synthetic models (or --model) with both recipes end to end (SDK dry run) and verify them: q1 on 1-bit-native models, int8 on ordinary ones",
	Run:     runDemo,
}

func runDemo(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	userModel := fs.String("model", "", "run on this model (HF directory or GGUF) instead of the synthetic ones")
	tok := fs.String("tokenizer", "", "--model's tokenizer when it has none: a tokenizer.json, a GGUF or a llama2.c tokenizer.bin (as build --tokenizer)")
	keep := fs.String("keep", "", "keep every output under this directory (default: a temporary directory, removed)")
	stages := fs.Int("stages", 2, "stages per plan")
	tokens := fs.IntP("tokens", "n", 32, "tokens decoded per verify prompt")
	soc := fs.String("soc", "8elite", "target SoC for the bundles")
	verbose := fs.BoolP("verbose", "v", false, "print each build's full summary")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	if *tok != "" && *userModel == "" {
		return usageError("--tokenizer goes with --model (the synthetic models have their own)")
	}
	if *stages < 1 || *tokens < 1 {
		return usageError("--stages and -n must be at least 1")
	}
	start := time.Now()
	if *keep != "" {
		// --keep is an output directory like build's: the user's files
		// in it are refused, a previous demo's outputs replaced.
		if err := checkPaths(modelInput(*userModel), nil, []string{*keep}); err != nil {
			return err
		}
	}
	o := pipeline.DemoOptions{
		Model: *userModel, Tokenizer: *tok, Keep: *keep,
		Stages: *stages, Tokens: *tokens, SoC: *soc, Version: qnnprepVersion(),
		Log: os.Stderr,
	}
	if *verbose {
		o.OnBuild = func(r *pipeline.Result) { printBuildSummary(os.Stdout, r) }
	}
	d, err := pipeline.RunDemo(ctx, o)
	if err != nil {
		return err
	}
	d.WriteTable(os.Stdout)
	fmt.Printf("\n%d builds in %.1f s", len(d.Rows), time.Since(start).Seconds())
	if *keep != "" {
		fmt.Printf("; outputs in %s", *keep)
	}
	fmt.Println()
	if !d.Pass() {
		fmt.Println("result: FAIL")
		return exitError{1}
	}
	fmt.Println("result: PASS")
	return nil
}
