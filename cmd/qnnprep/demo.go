package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// demoSeed fixes the synthetic weights, so every run builds the same bytes.
const demoSeed = 20260101

// demoRecipes are the recipes the demo builds each model with.
var demoRecipes = []string{"q1", "int8"}

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
	root := *keep
	if root == "" {
		tmp, err := os.MkdirTemp("", "qnnprep-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		root = tmp
	} else {
		// --keep is an output directory like build's: the user's files
		// in it are refused, a previous demo's outputs replaced.
		if err := checkPaths(modelInput(*userModel), nil, []string{root}); err != nil {
			return err
		}
		if err := atomicfile.Claim(root); err != nil {
			return err
		}
	}
	// claim records each entry in root's marker before it is written.
	claim := func(name string) error {
		if *keep == "" {
			return nil
		}
		return atomicfile.Claim(root, name)
	}

	var sources []demoSource
	if *userModel != "" {
		label := filepath.Base(filepath.Clean(*userModel))
		if m, err := model.Open(*userModel); err == nil {
			label = shard.ModelName(m)
			m.Close()
		}
		sources = []demoSource{{Label: label, Path: *userModel, Tokenizer: *tok, Recipes: demoRecipes, Kind: "given"}}
	} else {
		if err := claim("models"); err != nil {
			return err
		}
		var err error
		if sources, err = writeDemoModels(filepath.Join(root, "models")); err != nil {
			return err
		}
	}
	var rows []demoRow
	ok := true
	for _, src := range sources {
		for _, rname := range src.Recipes {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := claim(src.Label + "-" + rname); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "qnnprep demo: %s, recipe %s …\n", src.Label, rname)
			res, err := demoBuild(ctx, src, rname, filepath.Join(root, src.Label+"-"+rname), *stages, *tokens, *soc)
			if err != nil {
				return fmt.Errorf("%s, recipe %s: %w", src.Label, rname, err)
			}
			if *verbose {
				printBuildSummary(os.Stdout, res)
			}
			ok = ok && res.Pass()
			rows = append(rows, demoRow{src.Label, src.Kind, res})
		}
	}
	printDemoTable(os.Stdout, rows)
	fmt.Printf("\n%d builds in %.1f s", len(rows), time.Since(start).Seconds())
	if *keep != "" {
		fmt.Printf("; outputs in %s", *keep)
	}
	fmt.Println()
	if !ok {
		fmt.Println("result: FAIL")
		return exitError{1}
	}
	fmt.Println("result: PASS")
	return nil
}

type demoSource struct {
	Label     string
	Path      string
	Tokenizer string // build --tokenizer, if any
	Recipes   []string
	Kind      string // what the source is, for the table
}

// writeDemoModels writes the synthetic sources: a hybrid Qwen3.5 (Gated
// DeltaNet + gated attention) and a Llama, each twice. The q1 rows build
// 1-bit-native models released as 1-bit models are (synth.WriteGGUFOneBit:
// Q1_0 matrices, a Q2_0 head), which q1 stores without loss, so their
// qmodels must decode token for token like the source. The int8 rows build
// ordinary random models: the Qwen3.5 as a Hugging Face checkpoint, the
// Llama as an F32 GGUF. Every matrix row is a multiple of 128, so Q1_0
// applies everywhere. (q1 of a model not trained for 1-bit weights loses
// most of its top-1 agreement; qnnprep demo --model shows that, and the
// default thresholds fail it.)
func writeDemoModels(dir string) ([]demoSource, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []demoSource
	for _, arch := range []model.Arch{model.Qwen35, model.Llama} {
		cfg := synth.Config(arch, true)
		label := string(arch)
		native := filepath.Join(dir, label+"-1bit.gguf")
		if err := synth.WriteGGUFOneBit(native, cfg, demoSeed); err != nil {
			return nil, err
		}
		out = append(out, demoSource{Label: label, Path: native, Recipes: []string{"q1"}, Kind: "1-bit native"})
		var src string
		if arch == model.Qwen35 {
			src = filepath.Join(dir, label)
			if err := synth.WriteHF(src, cfg, demoSeed, 1); err != nil {
				return nil, err
			}
		} else {
			src = filepath.Join(dir, label+".gguf")
			if err := synth.WriteGGUF(src, cfg, demoSeed, gguf.F32); err != nil {
				return nil, err
			}
		}
		out = append(out, demoSource{Label: label, Path: src, Recipes: []string{"int8"}, Kind: "F32"})
	}
	return out, nil
}

// demoBuild runs the pipeline for one source and recipe without the SDK.
func demoBuild(ctx context.Context, src demoSource, recipe, out string, stages, tokens int, soc string) (*pipeline.Result, error) {
	r, err := quantize.LookupRecipe(recipe)
	if err != nil {
		return nil, err
	}
	o, err := buildOptions(src.Path, out, tokens, "")
	if err != nil {
		return nil, err
	}
	o.Recipe, o.SoC, o.DryRun, o.Threads = r, soc, true, 2
	// The hybrid's past_conv/past_ssm state is fed back by qnnprep's staged
	// runtime (which verify decodes through), not by Genie: build it as
	// --allow-recurrent-state would, and the table says so.
	o.AllowRecurrentState = true
	if src.Tokenizer != "" {
		o.Tokenizer = src.Tokenizer
	}
	o.Plan = shard.Options{Stages: stages}
	o.Calibration = &pipeline.CalibOptions{Greedy: 16}
	return pipeline.Build(ctx, o)
}

type demoRow struct {
	Label  string
	Source string
	Res    *pipeline.Result
}

// printDemoTable prints one row per build.
func printDemoTable(w io.Writer, rows []demoRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "model\trecipe\tbytes\tbpw\tstages\tgraphs\tcheck\tstaged==whole\ttop-1 vs source\texact vs source\tsource\tverdict")
	var states []string
	for _, row := range rows {
		r := row.Res
		stages, graphs, check := "-", "-", "-"
		if r.Plan != nil {
			stages, graphs = fmt.Sprint(len(r.Plan.Stages)), fmt.Sprint(len(r.Plan.Graphs))
		}
		if s := r.Step(pipeline.StepCheck); s != nil && s.Status != pipeline.StatusNotRun {
			check = "ok"
			if len(r.RecurrentState) > 0 {
				check = "ok*"
				states = append(states, row.Label+" "+r.Recipe)
			}
			if len(r.Violations) > 0 {
				check = fmt.Sprintf("%d violations", len(r.Violations))
			}
		}
		same, top1, exact, verdict := "-", "-", "-", "-"
		if v := r.Verify; v != nil && v.Whole != nil {
			s := v.Whole.Summary
			top1 = fmt.Sprintf("%.1f%%", 100*s.Top1)
			exact = fmt.Sprintf("%d/%d", s.Matched, s.Tokens)
			verdict = "PASS"
			if !r.Pass() {
				verdict = "FAIL"
			}
			switch {
			case v.StagedEqualsWhole == nil:
				same = "n/a (no staged executor)"
			case *v.StagedEqualsWhole:
				same = "yes"
			default:
				same = "NO"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Label, r.Recipe, bytesize.Format(r.Bytes), r.BPW, stages, graphs, check, same, top1, exact, row.Source, verdict)
	}
	tw.Flush()
	if len(states) > 0 {
		fmt.Fprintf(w, "* built with --allow-recurrent-state (%s): the graphs carry Gated DeltaNet past_conv/past_ssm state that Genie does not feed back between calls; the bundle needs a runtime that does, as qnnprep's staged runtime (verified above) does\n", strings.Join(states, ", "))
	}
	// Each verdict's thresholds, and what failed.
	for _, row := range rows {
		if v := row.Res.Verify; v != nil && v.Whole != nil {
			fmt.Fprintf(w, "%s %s: thresholds %s\n", row.Label, row.Res.Recipe, v.Whole.Criteria)
			for _, f := range v.Whole.Failures {
				fmt.Fprintf(w, "  FAIL: %s\n", f)
			}
		}
	}
}
