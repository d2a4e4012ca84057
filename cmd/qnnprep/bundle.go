package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
)

var bundleCmd = &command{
	Name: "bundle",
	Usage: "qnnprep bundle verify DIR [--json]\n" +
		"       qnnprep bundle build --plan PLAN --model QMODEL --graphs DIR --out DIR (--soc SOC | --soc-model N --dsp-arch vNN) [--qnn-sdk DIR] [--tokenizer FILE] [--dry-run] [-j N] [--timeout D] [--force]",
	Summary: "compile exported stages with the QAIRT SDK into a Genie bundle, or re-check a bundle against its manifest",
	Run:     runBundle,
}

func runBundle(ctx context.Context, c *command, args []string) error {
	if len(args) == 0 {
		return usageError("give a subcommand: verify or build")
	}
	switch args[0] {
	case "verify":
		return bundleVerify(c, args[1:])
	case "build":
		return bundleBuild(ctx, c, args[1:])
	case "-h", "--help":
		return parseFlags(newFlags(c), args)
	}
	return usageError("unknown subcommand %q, want verify or build", args[0])
}

func bundleVerify(c *command, args []string) error {
	fs := newFlags(c)
	asJSON := fs.Bool("json", false, "print the manifest as JSON when the bundle verifies")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("bundle verify takes one bundle directory")
	}
	dir := fs.Arg(0)
	m, err := qnnpack.VerifyBundle(dir)
	if err != nil {
		return err
	}
	if *asJSON {
		b, _ := json.MarshalIndent(m, "", "  ")
		fmt.Println(string(b))
		return nil
	}
	var total int64
	for _, f := range m.Files {
		total += f.Size
	}
	fmt.Printf("%s: OK, %d files (%d bytes) match manifest.json; qnnprep %s, SDK %s, SoC %s\n",
		dir, len(m.Files), total, m.Qnnprep, m.SDK.Version, m.SoC)
	for _, n := range m.Notes {
		fmt.Printf("note: %s\n", n)
	}
	return nil
}

func bundleBuild(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	planPath := fs.String("plan", "", "plan.json from 'qnnprep plan'")
	modelPath := fs.String("model", "", "the quantized model (qmodel GGUF) the plan was made from: BOS/EOS and rope theta for genie_config.json")
	graphs := fs.String("graphs", "", "directory with the exported stage graphs: <graph>.onnx and <graph>.encodings")
	out := fs.String("out", "", "bundle directory to write (replaced atomically)")
	work := fs.String("work", "", "work directory for DLCs, context binaries, logs and the cache (default OUT.work)")
	soc := addSoCFlags(fs, "")
	sdkDir := fs.String("qnn-sdk", "", "QAIRT/QNN SDK root (default $QNN_SDK_ROOT, then $QAIRT_SDK_ROOT)")
	tok := fs.String("tokenizer", "", "the bundle's tokenizer: an HF tokenizer.json (copied) or a vocabulary to write one from (GGUF, llama2.c tokenizer.bin); default: written from --model's vocabulary")
	prefix := fs.String("forecast-prefix", "", "ssd-q1 forecast prefix (Genie KV cache file); default a zero placeholder")
	dry := fs.Bool("dry-run", false, "print the SDK commands and write only the files the SDK does not produce")
	jobs := fs.IntP("jobs", "j", 2, "SDK tools run at once")
	timeout := fs.Duration("timeout", 0, "time limit per SDK tool run (0: none)")
	force := fs.Bool("force", false, "rebuild every stage, ignoring the cache")
	skipCheck := fs.Bool("skip-check", false, "build even if 'qnnprep check' rules fail (the bundle will not load in Genie)")
	allowState := fs.Bool("allow-recurrent-state", false, "build a plan whose graphs carry past_conv/past_ssm state, which Genie does not feed back: the manifest then says the bundle needs a runtime that does")
	convArgs := fs.StringArray("converter-arg", nil, "extra qairt-converter argument, repeatable (e.g. --converter-arg=--float_bitwidth --converter-arg=16)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	for _, f := range []struct{ name, v string }{{"--plan", *planPath}, {"--model", *modelPath}, {"--graphs", *graphs}, {"--out", *out}} {
		if f.v == "" {
			return usageError("%s is required", f.name)
		}
	}
	workDir := *work
	if workDir == "" {
		workDir = filepath.Clean(*out) + ".work"
	}
	if err := checkPaths(ins(modelInput(*modelPath), []string{*planPath, *graphs, *tok, *prefix}), nil, []string{*out, workDir}); err != nil {
		return err
	}
	chip, err := soc()
	if err != nil {
		return err
	}
	plan, err := shard.ReadPlan(*planPath)
	if err != nil {
		return err
	}
	m, err := model.Open(*modelPath)
	if err != nil {
		return err
	}
	cfg := m.Config
	bt, err := pipeline.ModelTokenizer(m, *tok, nil, nil)
	m.Close()
	if err != nil {
		return err
	}
	if err := plan.Fits(cfg); err != nil {
		return fmt.Errorf("%s does not describe %s: %w", *planPath, *modelPath, err)
	}
	files, err := qnnpack.FindGraphFiles(plan, *graphs)
	if err != nil {
		return err
	}
	var sdk *qnnpack.SDK
	if sdk, err = qnnpack.FindSDK(*sdkDir); err != nil && !(*dry && errors.Is(err, qnnpack.ErrNoSDK)) {
		return err
	}
	// Progress goes to stderr; a dry run's commands to stdout, for a shell.
	log := io.Writer(os.Stderr)
	if *dry {
		log = os.Stdout
	}
	res, err := qnnpack.Build(ctx, qnnpack.BuildOptions{
		SDK: sdk, Plan: plan, Config: cfg, Graphs: files, OutDir: *out, WorkDir: workDir, SoC: chip,
		ConverterArgs: *convArgs, SkipCheck: *skipCheck, AllowRecurrentState: *allowState, Tokenizer: bt.Copy, TokenizerJSON: bt.JSON, EOG: bt.EOG, ForecastPrefix: *prefix, QnnprepVersion: qnnprepVersion(),
		DryRun: *dry, Parallel: *jobs, Timeout: *timeout, Force: *force, Log: log,
	})
	if err != nil {
		return err
	}
	if *dry {
		fmt.Fprintf(os.Stderr, "dry run: wrote %s without context binaries\n", *out)
		return nil
	}
	ran, cached := 0, 0
	var took time.Duration
	for _, r := range res.Runs {
		if r.Cached {
			cached++
		} else {
			ran++
			took += r.Duration
		}
	}
	fmt.Printf("%s: %d stages, %d SDK jobs run (%.1fs of tool time), %d up to date\n", *out, len(plan.Stages), ran, took.Seconds(), cached)
	if len(res.Manifest.Notes) > 0 {
		fmt.Printf("note: %s\n", strings.Join(res.Manifest.Notes, "\nnote: "))
	}
	return nil
}
