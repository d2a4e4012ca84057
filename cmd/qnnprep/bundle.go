package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/scaleout"
	"github.com/qnnprep/qnnprep/shard"
)

var bundleCmd = &command{
	Name: "bundle",
	Usage: "qnnprep bundle verify DIR [--json]\n" +
		"       qnnprep bundle build --plan PLAN --model QMODEL --graphs DIR --out DIR (--soc SOC | --soc-model N --dsp-arch vNN) [--qnn-sdk DIR] [--tokenizer FILE] [--dry-run] [-j N] [--timeout D] [--force] [--cache DIR|oci://HOST/REPO] [--shard I/N | --shard-count N]\n" +
		"       qnnprep bundle assemble --plan PLAN --model QMODEL --graphs DIR --out DIR --cache DIR|oci://HOST/REPO [--shard-count N] (--soc SOC | ...) [--qnn-sdk DIR] [--tokenizer FILE]\n" +
		"       qnnprep bundle pack DIR OUT.tar.zst\n" +
		"       qnnprep bundle unpack IN.tar.zst DIR\n" +
		"       qnnprep bundle push DIR HOST/REPO:TAG\n" +
		"       qnnprep bundle pull HOST/REPO:TAG DIR",
	Summary: "compile exported stages with the QAIRT SDK into a Genie bundle (whole, one shard, or assembled from shards), re-check, pack or move a bundle",
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
	case "assemble":
		return bundleAssemble(ctx, c, args[1:])
	case "pack":
		return bundlePack(ctx, c, args[1:])
	case "unpack":
		return bundleUnpack(ctx, c, args[1:])
	case "push":
		return bundlePush(ctx, c, args[1:])
	case "pull":
		return bundlePull(ctx, c, args[1:])
	case "-h", "--help":
		return parseFlags(newFlags(c), args)
	}
	return usageError("unknown subcommand %q, want verify, build, assemble, pack, unpack, push or pull", args[0])
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
		printJSON(m)
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
	graphs := fs.String("graphs", "", "directory with the exported stage graphs: <graph>.onnx and <graph>.encodings.json")
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
	cacheSpec := fs.String("cache", "", "job cache shared with other builds: a directory, or oci://HOST/REPO for an OCI registry")
	shardSpec := fs.String("shard", "", "build only shard I of N (I from 0): its share of the stages, balanced by stage bytes, into --work and --cache; no bundle ('bundle assemble' writes it)")
	shardCount := fs.Int("shard-count", 0, "build one shard of N, its index taken from $JOB_COMPLETION_INDEX (Kubernetes) or $SLURM_ARRAY_TASK_ID (Slurm)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	sh, sharded, err := shardFlags(*shardSpec, *shardCount)
	if err != nil {
		return err
	}
	if sharded && *dry {
		return usageError("--shard and --dry-run: a dry run builds no stage")
	}
	if sharded && *cacheSpec == "" {
		return usageError("--shard needs --cache: the stages it builds go there for 'bundle assemble'")
	}
	in, err := loadBundleInputs(bundleInputs{plan: *planPath, model: *modelPath, graphs: *graphs, out: *out, work: *work, tok: *tok, prefix: *prefix, sdk: *sdkDir, soc: soc, noSDK: *dry})
	if err != nil {
		return err
	}
	cache, err := scaleout.OpenCache(*cacheSpec)
	if err != nil {
		return err
	}
	// Progress goes to stderr; a dry run's commands to stdout, for a shell.
	log := io.Writer(os.Stderr)
	if *dry {
		log = os.Stdout
	}
	o := in.options()
	o.ConverterArgs, o.SkipCheck, o.AllowRecurrentState, o.ForecastPrefix = *convArgs, *skipCheck, *allowState, *prefix
	o.DryRun, o.Parallel, o.Timeout, o.Force, o.Log, o.Cache = *dry, *jobs, *timeout, *force, log, cache
	plan := in.plan
	if sharded {
		res, stages, err := scaleout.BuildShard(ctx, o, sh)
		if err != nil {
			return err
		}
		names := make([]string, len(stages))
		for i, s := range stages {
			names[i] = fmt.Sprint(s + 1)
		}
		fmt.Printf("shard %s: stages %s of %d built into %s and the cache (%s)\n", sh, strings.Join(names, ","), len(plan.Stages), o.WorkDir, runCounts(res.Runs))
		return nil
	}
	res, err := qnnpack.Build(ctx, o)
	if err != nil {
		return err
	}
	if *dry {
		fmt.Fprintf(os.Stderr, "dry run: wrote %s without context binaries\n", *out)
		return nil
	}
	fmt.Printf("%s: %d stages, %s\n", *out, len(plan.Stages), runCounts(res.Runs))
	if len(res.Manifest.Notes) > 0 {
		fmt.Printf("note: %s\n", strings.Join(res.Manifest.Notes, "\nnote: "))
	}
	return nil
}

// runCounts says how many SDK jobs ran, how long, and how many were up
// to date or came from the cache.
func runCounts(runs []qnnpack.JobResult) string {
	c := qnnpack.CountJobs(runs)
	s := fmt.Sprintf("%d SDK jobs run (%.1fs of tool time), %d up to date", c.Ran, c.ToolTime.Seconds(), c.UpToDate)
	if c.Fetched > 0 {
		s += fmt.Sprintf(", %d from the cache", c.Fetched)
	}
	return s
}

// shardFlags reads --shard I/N or --shard-count N (index from the
// engine's environment); sharded is false when neither is given.
func shardFlags(spec string, count int) (s scaleout.Shard, sharded bool, err error) {
	switch {
	case spec != "" && count != 0:
		return s, false, usageError("give --shard I/N or --shard-count N, not both")
	case spec != "":
		s, err = scaleout.ParseShard(spec)
		if err != nil {
			return s, false, usageError("--shard: %v", err)
		}
		return s, true, nil
	case count != 0:
		s, ok, err := scaleout.ShardFromEnv(count)
		if err != nil {
			return s, false, usageError("--shard-count: %v", err)
		}
		if !ok {
			return s, false, usageError("--shard-count %d: neither $%s nor $%s says which shard this is; use --shard I/N", count, scaleout.EnvK8sIndex, scaleout.EnvSlurmIndex)
		}
		return s, true, nil
	}
	return s, false, nil
}

// bundleInputs are the flags bundle build and bundle assemble share.
type bundleInputs struct {
	plan, model, graphs, out, work, tok, prefix, sdk string
	soc                                              func() (string, error)
	noSDK                                            bool // a dry run may go without an SDK
}

// loadedBundle is what those flags name, read and checked.
type loadedBundle struct {
	plan    *shard.Plan
	cfg     model.Config
	tok     *pipeline.BundleTokenizer
	files   map[string]qnnpack.GraphFiles
	sdk     *qnnpack.SDK
	chip    string
	out     string
	workDir string
}

func loadBundleInputs(b bundleInputs) (*loadedBundle, error) {
	for _, f := range []struct{ name, v string }{{"--plan", b.plan}, {"--model", b.model}, {"--graphs", b.graphs}, {"--out", b.out}} {
		if f.v == "" {
			return nil, usageError("%s is required", f.name)
		}
	}
	l := &loadedBundle{out: b.out, workDir: b.work}
	if l.workDir == "" {
		l.workDir = filepath.Clean(b.out) + ".work"
	}
	if err := checkPaths(ins(modelInput(b.model), []string{b.plan, b.graphs, b.tok, b.prefix}), nil, []string{b.out, l.workDir}); err != nil {
		return nil, err
	}
	var err error
	if l.chip, err = b.soc(); err != nil {
		return nil, err
	}
	if l.plan, err = shard.ReadPlan(b.plan); err != nil {
		return nil, err
	}
	m, err := model.Open(b.model)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	l.cfg = m.Config
	if l.tok, err = pipeline.ModelTokenizer(m, b.tok, nil, nil); err != nil {
		return nil, err
	}
	if err := l.plan.Fits(l.cfg); err != nil {
		return nil, fmt.Errorf("%s does not describe %s: %w", b.plan, b.model, err)
	}
	// The manifest states the plan's stage bytes and the bundle's check
	// judges them: they must be this model's.
	if err := l.plan.SizedFor(m); err != nil {
		return nil, fmt.Errorf("%s: %w", b.plan, err)
	}
	if l.files, err = qnnpack.FindGraphFiles(l.plan, b.graphs); err != nil {
		return nil, err
	}
	if l.sdk, err = qnnpack.FindSDK(b.sdk); err != nil && !(b.noSDK && errors.Is(err, qnnpack.ErrNoSDK)) {
		return nil, err
	}
	return l, nil
}

func (l *loadedBundle) options() qnnpack.BuildOptions {
	return qnnpack.BuildOptions{
		SDK: l.sdk, Plan: l.plan, Config: l.cfg, Graphs: l.files, OutDir: l.out, WorkDir: l.workDir, SoC: l.chip,
		Tokenizer: l.tok.Copy, TokenizerJSON: l.tok.JSON, EOG: l.tok.EOG, QnnprepVersion: qnnprepVersion(),
	}
}
