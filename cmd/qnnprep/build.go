package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/scaleout"
	"github.com/qnnprep/qnnprep/shard"
)

var buildCmd = &command{
	Name:    "build",
	Usage:   "qnnprep build MODEL OUTDIR --recipe q1|int8 [--stages N] [--ar 128,1] [--cl 4096] [--soc 8elite | --soc-model N --dsp-arch vNN] [--dialog basic|ssd-q1|spd|eaglet ...] [--draft MODEL] [--eagle3 HEAD] [--qnn-sdk DIR] [--dry-run] [--cache DIR|oci://HOST/REPO] [--shard I/N | --shard-count N] [--calib-text FILE ... | --calibrate N] [--simulate=false] [-n TOKENS] [--min-match F] [--min-top1 F] [--min-cosine F] [--fail-on-degeneration=false] [--json]",
	Summary: "end to end: quantize, plan, check, export ONNX, SDK → Genie bundle, verify staged == whole decode",
	Run:     runBuild,
}

func runBuild(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	recipeFlags := addRecipeFlags(fs, "", "recipe")
	planOpts := addPlanFlags(fs)
	draft := fs.String("draft", "", "spd: the draft model (same vocabulary), built with the same recipe into the bundle's draft/")
	draftStages := fs.Int("draft-stages", 1, "spd: stages of the draft model")
	eagle3 := fs.String("eagle3", "", "eaglet: the EAGLE-3 head (llama.cpp eagle3 GGUF, as convert writes it, or a Hugging Face head directory), exported as the draft engine's graphs; the target's taps and the head's fc go into the target's graphs")
	forecastEmb := fs.String("forecast-embeddings", "", "ssd-q1: the trained forecast-token embeddings (safetensors or GGUF: forecast-token-count rows of the hidden size), added to the first stage's embedding table and the bundle")
	prefixFile := fs.String("forecast-prefix-file", "", "ssd-q1: the forecast prefix for the bundle (a Genie KV cache file); default a zero placeholder")
	name := fs.String("name", "", "model name used in graph names (default: general.name or the file name)")
	skipCheck := fs.Bool("skip-check", false, "build even if the plan breaks Genie's contract (the bundle will not load)")
	allowState := fs.Bool("allow-recurrent-state", false, "build a model whose graphs carry past_conv/past_ssm state (Gated DeltaNet), which Genie does not feed back: the bundle then needs a runtime that does, as qnnprep's staged runtime does")
	soc := addSoCFlags(fs, "8elite")
	sdkDir := fs.String("qnn-sdk", "", "QAIRT/QNN SDK root (default $QNN_SDK_ROOT, then $QAIRT_SDK_ROOT); without one the build stops before the SDK tools and prints their commands")
	dry := fs.Bool("dry-run", false, "never run the SDK: print its commands and write every file it does not produce")
	tok := fs.String("tokenizer", "", "the bundle's tokenizer: an HF tokenizer.json (copied) or a vocabulary to write one from (GGUF, llama2.c tokenizer.bin); default: MODEL's tokenizer.json or vocabulary")
	calib := fs.Int("calibrate", 16, "activation ranges from a greedy decode of this many tokens (0: default encodings only); --calib-text replaces it")
	calibText := addCalibFlags(fs)
	simulate := fs.Bool("simulate", true, "after export, decode the prompts with the exported encodings simulated (activations, KV, states and logits fake-quantized) and fail the build when they lose more than the thresholds in README's Verdicts allow against the float decode")
	convArgs := fs.StringArray("converter-arg", nil, "extra qairt-converter argument, repeatable")
	jobs := fs.IntP("jobs", "j", 2, "SDK tools run at once")
	timeout := fs.Duration("timeout", 0, "time limit per SDK tool run (0: none)")
	force := fs.Bool("force", false, "rebuild every stage, ignoring the SDK cache")
	cacheSpec := fs.String("cache", "", "SDK job cache shared with other builds: a directory, or oci://HOST/REPO for an OCI registry")
	shardSpec := fs.String("shard", "", "run the SDK for shard I of N only (I from 0): its share of the stages, balanced by stage bytes, into the work directory and --cache; no bundle ('bundle assemble' writes it)")
	shardCount := fs.Int("shard-count", 0, "run one shard of N, its index taken from $JOB_COMPLETION_INDEX (Kubernetes) or $SLURM_ARRAY_TASK_ID (Slurm)")
	tokens := fs.IntP("tokens", "n", 16, "verify: tokens decoded per prompt")
	noVerify := fs.Bool("no-verify", false, "skip the verify step (nothing then proves the stages decode like the model)")
	promptsPath := fs.String("prompts", "", "verify: prompts file (one per line, text or \"ids: 1 2 3\"); default three id prompts")
	thresholds := addThresholdFlags(fs, "verify: ")
	threads := fs.IntP("threads", "t", 2, "worker threads (outputs do not depend on it)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	quiet := fs.BoolP("quiet", "q", false, "no progress on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("want MODEL and OUTDIR")
	}
	r, rules, err := recipeFlags()
	if err != nil {
		return err
	}
	po, err := planOpts()
	if err != nil {
		return err
	}
	chip, err := soc()
	if err != nil {
		return err
	}
	if *tokens < 1 {
		return usageError("-n %d: want at least 1", *tokens)
	}
	ov, err := thresholds()
	if err != nil {
		return err
	}
	co, err := calibText()
	if err != nil {
		return err
	}
	if co.Text != "" && fs.Changed("calibrate") && *calib > 0 {
		return usageError("give --calib-text or --calibrate, not both")
	}
	if co.Text == "" && *calib == 0 && fs.Changed("calib-stat") {
		return usageError("--calib-stat needs --calib-text or --calibrate")
	}
	sh, sharded, err := shardFlags(*shardSpec, *shardCount)
	if err != nil {
		return err
	}
	if sharded && (*dry || *cacheSpec == "") {
		return usageError("--shard runs the SDK (no --dry-run) and needs --cache, where 'bundle assemble' finds its stages")
	}
	cache, err := scaleout.OpenCache(*cacheSpec)
	if err != nil {
		return err
	}
	src, out := fs.Arg(0), fs.Arg(1)
	var draftIn []string
	if *draft != "" {
		draftIn = modelInput(*draft)
	}
	if *eagle3 != "" {
		draftIn = append(draftIn, modelInput(*eagle3)...)
	}
	if err := checkPaths(ins(modelInput(src), draftIn, []string{*promptsPath, *tok, *forecastEmb, *prefixFile, co.Text}), nil, []string{out, filepath.Join(out, pipeline.BundleDir)}); err != nil {
		return err
	}
	var sdk *qnnpack.SDK
	if !*dry {
		if sdk, err = qnnpack.FindSDK(*sdkDir); err != nil && !errors.Is(err, qnnpack.ErrNoSDK) {
			return fmt.Errorf("sdk: %w", err)
		}
	}
	o, err := pipeline.SourceOptions(src, out, *tokens, *promptsPath, qnnprepVersion())
	if err != nil {
		return err
	}
	o.Recipe, o.Overrides, o.Plan, o.Name, o.SkipCheck = r, rules, po, *name, *skipCheck
	o.AllowRecurrentState = *allowState
	o.SoC, o.SDK, o.DryRun, o.ConverterArgs = chip, sdk, *dry, *convArgs
	o.Parallel, o.Timeout, o.Force, o.Threads = *jobs, *timeout, *force, *threads
	o.Cache = cache
	if sharded {
		o.Shard = &sh
	}
	o.Thresholds, o.NoVerify = ov, *noVerify
	o.ForecastEmbeddings, o.ForecastPrefix = *forecastEmb, *prefixFile
	if *tok != "" {
		o.Tokenizer = *tok
	}
	o.Eagle3 = *eagle3
	if *draft != "" {
		o.Draft = &pipeline.Draft{Source: *draft, Plan: shard.Options{Stages: *draftStages}}
	}
	switch {
	case co.Text != "":
		o.Calibration = &co
	case *calib > 0:
		co.Greedy = *calib
		o.Calibration = &co
	}
	o.NoSimulate = !*simulate
	// Commands go to stdout (for a shell), SDK job lines to stderr.
	if !*asJSON {
		o.Commands = os.Stdout
	}
	if !*quiet {
		o.Log = os.Stderr
	}
	prog := newStepProgress(*quiet || *asJSON)
	o.OnStep, o.Progress = prog.onStep, prog.progress
	res, err := pipeline.Build(ctx, o)
	prog.finish()
	if res != nil {
		if *asJSON {
			printJSON(res)
		} else {
			printBuildSummary(os.Stdout, res)
		}
	}
	if err != nil {
		return err
	}
	if !res.Pass() {
		return exitError{1}
	}
	return nil
}

// printBuildSummary prints the step table, the plan's stages and the
// verification.
func printBuildSummary(w io.Writer, r *pipeline.Result) {
	fmt.Fprintf(w, "\n%s → %s (recipe %s, SoC %s)\n", r.Source, r.OutDir, r.Recipe, r.SoC)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\tstatus\ttime\toutputs\tnotes")
	for _, s := range r.Steps {
		t := "-"
		if s.Status != pipeline.StatusNotRun {
			t = fmt.Sprintf("%.2fs", s.Seconds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Status, t, strings.Join(s.Outputs, " "), s.Note)
	}
	tw.Flush()
	if p := r.Plan; p != nil {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "stage\tlayers\tdevice bytes (%s)\tqmodel bytes\tweights\tgraphs\n", p.Container)
		for _, s := range p.Stages {
			fmt.Fprintf(tw, "%d\t%d-%d\t%s\t%s\t%s\t%s\n", s.Index, s.FirstLayer, s.LastLayer, bytesize.Format(s.Bytes), bytesize.Format(s.QModelBytes), s.WeightType, strings.Join(s.Graphs, " "))
		}
		tw.Flush()
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "check: %s\n", v)
	}
	if len(r.RecurrentState) > 0 {
		fmt.Fprintf(w, "note: %s\n", qnnpack.RecurrentStateNote(len(r.RecurrentState)))
	}
	if v := r.Verify; v != nil && v.Whole != nil { // Whole is nil when its decode failed
		fmt.Fprintf(w, "\nverify: %d prompts × %d tokens, golden recorded from the source (%s)\n", v.Prompts, v.Tokens, r.Source)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "decode\ttop-1 vs source\texact tokens\texact prompts\tsame as whole")
		row := func(name string, rep *golden.Report, same string) {
			s := rep.Summary
			fmt.Fprintf(tw, "%s\t%.1f%%\t%d/%d\t%d/%d\t%s\n", name, 100*s.Top1, s.Matched, s.Tokens, s.ExactPrompts, s.Prompts, same)
		}
		row("qmodel whole", v.Whole, "-")
		if v.Staged != nil {
			row("qmodel staged", v.Staged, yesNo(*v.StagedEqualsWhole))
		}
		if v.Speculative != nil {
			name := "qmodel speculative (draft)"
			if r.Plan != nil && r.Plan.Dialog.Type == shard.SSD {
				name = "qmodel ssd-q1 (staged)"
			}
			row(name, v.Speculative, yesNo(*v.SpeculativeEqualsWhole))
		}
		tw.Flush()
		if sr := v.Speculative; sr != nil && sr.Speculative != nil {
			fmt.Fprintf(w, "speculative: %.2f of %d drafts accepted per target call, %.2f target calls per token\n", sr.Speculative.AcceptanceLength, sr.Speculative.K, sr.Speculative.TargetCallsPerToken)
		}
		if v.Note != "" {
			fmt.Fprintf(w, "note: %s\n", v.Note)
		}
		if v.Whole.Source != nil {
			fmt.Fprintf(w, "golden accepted: %s\n", v.Whole.Source)
		}
		fmt.Fprintf(w, "thresholds: %s\n", v.Whole.Criteria)
		for _, f := range v.Whole.Failures {
			fmt.Fprintf(w, "FAIL: %s\n", f)
		}
	}
	if sim := r.Simulation; sim != nil {
		cos := "-"
		if c := sim.Summary.Cosine; c != nil {
			cos = fmt.Sprintf("%.5f", *c)
		}
		fmt.Fprintf(w, "\nsimulate: encodings of %s/%s/%s against the float decode: top-1 %.1f%%, cosine %s, exact %d/%d tokens\n",
			r.OutDir, pipeline.WorkDir, pipeline.ONNXDir, 100*sim.Summary.Top1, cos, sim.Summary.Matched, sim.Summary.Tokens)
		fmt.Fprintf(w, "simulation thresholds: %s\n", sim.Criteria)
		for _, f := range sim.Failures {
			fmt.Fprintf(w, "FAIL: simulation: %s\n", f)
		}
	}
	if r.DryRun && len(r.Commands) > 0 {
		fmt.Fprintf(w, "\nSDK not run: the %d commands above are also in %s/%s/%s\n", len(r.Commands), r.OutDir, pipeline.WorkDir, pipeline.CommandsName)
	}
	switch {
	case r.Pass() && r.Verify == nil:
		fmt.Fprintln(w, "result: built, NOT verified")
	case r.Pass():
		fmt.Fprintln(w, "result: PASS")
	default:
		fmt.Fprintln(w, "result: FAIL")
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// stepProgress shows a line per step and, on a terminal, a bar for the
// steps that report progress.
type stepProgress struct {
	quiet bool
	tty   bool
	bar   *progressbar.ProgressBar
	step  string
}

func newStepProgress(quiet bool) *stepProgress {
	return &stepProgress{quiet: quiet, tty: !quiet && term.IsTerminal(int(os.Stderr.Fd()))}
}

func (p *stepProgress) onStep(s pipeline.StepResult) {
	if p.quiet {
		return
	}
	p.finish()
	if s.Status == "" {
		fmt.Fprintf(os.Stderr, "qnnprep build: %s …\n", s.Name)
	}
}

func (p *stepProgress) progress(step string, done, total int64) {
	if !p.tty {
		return
	}
	if p.bar == nil || p.step != step {
		p.finish()
		opts := []progressbar.Option{
			progressbar.OptionSetDescription(step),
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionClearOnFinish(),
		}
		if step == pipeline.StepQuantize {
			opts = append(opts, progressbar.OptionShowBytes(true))
		} else {
			opts = append(opts, progressbar.OptionShowCount())
		}
		p.bar, p.step = progressbar.NewOptions64(total, opts...), step
	}
	if p.bar.GetMax64() != total {
		p.bar.ChangeMax64(total)
	}
	p.bar.Set64(done)
}

func (p *stepProgress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
}
