package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// demoSeed fixes the synthetic weights, so every run builds the same bytes.
const demoSeed = 20260101

// demoRecipes are the recipes a given model is built with.
var demoRecipes = []string{"q1", "int8"}

// DemoOptions say what qnnprep demo builds: the synthetic models, or
// Model with both recipes.
type DemoOptions struct {
	Model     string // a source to build instead of the synthetic models
	Tokenizer string // Model's tokenizer when it has none (Options.Tokenizer)
	// Keep is the directory every output goes under, an output directory
	// like build's (atomicfile.Claim: a previous demo's outputs are
	// replaced, anything else refused); "" uses a temporary directory,
	// removed on return.
	Keep    string
	Stages  int    // stages per plan
	Tokens  int    // tokens decoded per verify prompt
	SoC     string // target SoC of the bundles
	Version string // qnnprep's version, recorded in the outputs

	Log     io.Writer       // a line as each build starts; may be nil
	OnBuild func(r *Result) // called after each build; may be nil
}

// DemoRow is one build of a demo.
type DemoRow struct {
	Label  string // the model
	Source string // what the source is: "1-bit native", "F32" or "given"
	Res    *Result
}

// Demo is what qnnprep demo built and verified.
type Demo struct {
	Rows []DemoRow
}

// Pass reports whether every build passed.
func (d *Demo) Pass() bool {
	for _, r := range d.Rows {
		if !r.Res.Pass() {
			return false
		}
	}
	return true
}

// demoSource is one source model and the recipes it is built with.
type demoSource struct {
	Label     string
	Path      string
	Tokenizer string // Options.Tokenizer, if any
	Recipes   []string
	Kind      string // what the source is, for the table
}

// RunDemo builds each source with its recipes end to end without the SDK
// (a dry run) and verifies it: a hybrid Qwen3.5 and a Llama, each as a
// 1-bit-native model with q1 and as an ordinary one with int8
// (writeDemoModels), or o.Model with both recipes.
func RunDemo(ctx context.Context, o DemoOptions) (*Demo, error) {
	root := o.Keep
	if root == "" {
		tmp, err := os.MkdirTemp("", "qnnprep-demo-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		root = tmp
	} else if err := atomicfile.Claim(root); err != nil {
		return nil, err
	}
	// claim records each entry in root's marker before it is written.
	claim := func(name string) error {
		if o.Keep == "" {
			return nil
		}
		return atomicfile.Claim(root, name)
	}

	var sources []demoSource
	if o.Model != "" {
		label := filepath.Base(filepath.Clean(o.Model))
		if m, err := model.Open(o.Model); err == nil {
			label = shard.ModelName(m)
			m.Close()
		}
		sources = []demoSource{{Label: label, Path: o.Model, Tokenizer: o.Tokenizer, Recipes: demoRecipes, Kind: "given"}}
	} else {
		if err := claim("models"); err != nil {
			return nil, err
		}
		var err error
		if sources, err = writeDemoModels(filepath.Join(root, "models")); err != nil {
			return nil, err
		}
	}
	d := &Demo{}
	for _, src := range sources {
		for _, rname := range src.Recipes {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := claim(src.Label + "-" + rname); err != nil {
				return nil, err
			}
			if o.Log != nil {
				fmt.Fprintf(o.Log, "qnnprep demo: %s, recipe %s …\n", src.Label, rname)
			}
			res, err := demoBuild(ctx, src, rname, filepath.Join(root, src.Label+"-"+rname), o)
			if err != nil {
				return nil, fmt.Errorf("%s, recipe %s: %w", src.Label, rname, err)
			}
			if o.OnBuild != nil {
				o.OnBuild(res)
			}
			d.Rows = append(d.Rows, DemoRow{src.Label, src.Kind, res})
		}
	}
	return d, nil
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

// demoBuild runs Build for one source and recipe without the SDK.
func demoBuild(ctx context.Context, src demoSource, recipe, out string, d DemoOptions) (*Result, error) {
	r, err := quantize.LookupRecipe(recipe)
	if err != nil {
		return nil, err
	}
	o, err := SourceOptions(src.Path, out, d.Tokens, "", d.Version)
	if err != nil {
		return nil, err
	}
	o.Recipe, o.SoC, o.DryRun, o.Threads = r, d.SoC, true, 2
	// The hybrid's past_conv/past_ssm state is fed back by qnnprep's staged
	// runtime (which verify decodes through), not by Genie: build it as
	// --allow-recurrent-state would, and the table says so.
	o.AllowRecurrentState = true
	if src.Tokenizer != "" {
		o.Tokenizer = src.Tokenizer
	}
	o.Plan = shard.Options{Stages: d.Stages}
	o.Calibration = &CalibOptions{Greedy: 16}
	return Build(ctx, o)
}

// WriteTable writes one row per build, then each verdict's thresholds and
// what failed.
func (d *Demo) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "model\trecipe\tbytes\tbpw\tstages\tgraphs\tcheck\tstaged==whole\ttop-1 vs source\texact vs source\tsource\tverdict")
	var states []string
	for _, row := range d.Rows {
		r := row.Res
		stages, graphs, check := "-", "-", "-"
		if r.Plan != nil {
			stages, graphs = fmt.Sprint(len(r.Plan.Stages)), fmt.Sprint(len(r.Plan.Graphs))
		}
		if s := r.Step(StepCheck); s != nil && s.Status != StatusNotRun {
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
	for _, row := range d.Rows {
		if v := row.Res.Verify; v != nil && v.Whole != nil {
			fmt.Fprintf(w, "%s %s: thresholds %s\n", row.Label, row.Res.Recipe, v.Whole.Criteria)
			for _, f := range v.Whole.Failures {
				fmt.Fprintf(w, "  FAIL: %s\n", f)
			}
		}
	}
}
