package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/sparse"
	"github.com/qnnprep/qnnprep/sparse/study"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// sparsifyDefaultPrompts are used for the golden comparison when neither --golden
// nor --prompts is given (and the model has a tokenizer).
var sparsifyDefaultPrompts = []string{"Once upon a time", "The little dog", "One day, a girl named", "Tom had a big"}

var sparsifyCmd = &command{
	Name: "sparsify",
	Usage: "qnnprep sparsify MODEL OUT --pattern 2:4|N:M|blockB|channel|head|neuron|layer [--sparsity S] [--target 'PATTERN=S']... " +
		"[--align N] [--select magnitude|wanda --calib FILE] [--recipe R] [--prune] [--golden FILE [--source-fingerprint SHA] | --prompts FILE [--save-golden FILE]] [--steps N] [--report FILE] [--json]",
	Summary: "write a structured-zero dense variant (and with --prune the smaller model) and measure its quality against the dense model",
	Run:     runSparsify,
}

func runSparsify(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	patFlag := fs.String("pattern", "", "sparsity pattern: N:M (2:4, 4:8, …), blockB (block32), channel, head, neuron or layer")
	sparsity := fs.Float64("sparsity", 0, "target sparsity in [0, 1) (N:M: must equal 1 − N/M; default 1 − N/M)")
	targets := fs.StringArray("target", nil, "per-tensor sparsity PATTERN=S for N:M and block patterns, e.g. 'blk.*.ffn_*=0.5'; repeatable, first match wins")
	align := fs.Int("align", 0, "channel/neuron: remove more so the pruned width is a multiple of N (32 for Q8_0 rows, 128 for Q1_0)")
	sel := fs.String("select", "magnitude", "selection: magnitude (|w|) or wanda (|w|·‖x‖ over --calib prompts)")
	calib := fs.String("calib", "", "calibration prompts for wanda: one per line, text or 'ids: 1 2 3'")
	recipeFlags := addRecipeFlags(fs, "keep", "quantization recipe for the written variant")
	prune := fs.Bool("prune", false, "also write the physically pruned model to OUT with .pruned.gguf (channel, head, neuron, layer)")
	goldenPath := fs.String("golden", "", "golden file to compare against (default: recorded from the dense model); it must come from MODEL or what MODEL was made from")
	sourceFP := fs.String("source-fingerprint", "", "with --golden: accept it for a MODEL made elsewhere (llama.cpp) from the golden's source: its fingerprint (the report shows the override)")
	promptsPath := fs.String("prompts", "", "prompts for the golden recorded from the dense model (one per line, text or 'ids: …')")
	steps := fs.Int("steps", 64, "tokens per prompt when recording the golden")
	saveGolden := fs.String("save-golden", "", "write the golden recorded from the dense model to FILE (for qnnprep compare)")
	report := fs.String("report", "", "write the JSON report to FILE")
	asJSON := fs.Bool("json", false, "print the JSON report instead of tables")
	threads := fs.IntP("threads", "t", 2, "threads")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("want MODEL and OUT")
	}
	if *patFlag == "" {
		return usageError("--pattern is required")
	}
	pat, err := sparse.ParsePattern(*patFlag)
	if err != nil {
		return usageError("%v", err)
	}
	method, err := sparse.ParseMethod(*sel)
	if err != nil {
		return usageError("%v", err)
	}
	if method == sparse.Wanda && *calib == "" {
		return usageError("--select wanda needs --calib FILE")
	}
	if *goldenPath != "" && (*promptsPath != "" || *saveGolden != "") {
		return usageError("--golden replaces the recorded golden: give no --prompts or --save-golden with it")
	}
	if *sourceFP != "" && *goldenPath == "" {
		return usageError("--source-fingerprint applies to a --golden file")
	}
	if *steps < 1 {
		return usageError("--steps %d: want at least 1", *steps)
	}
	if *prune && !pat.Structural() {
		return usageError("--prune needs a channel, head, neuron or layer pattern, not %s", pat)
	}
	opt := sparse.Options{Pattern: pat, Sparsity: *sparsity, Method: method, Align: *align}
	for _, s := range *targets {
		tg, err := sparse.ParseTarget(s)
		if err != nil {
			return usageError("%v", err)
		}
		opt.Targets = append(opt.Targets, tg)
	}
	recipe, rules, err := recipeFlags()
	if err != nil {
		return err
	}
	in, out := fs.Arg(0), fs.Arg(1)
	var prunedOut string
	if *prune {
		prunedOut = strings.TrimSuffix(out, filepath.Ext(out)) + ".pruned.gguf"
	}
	if err := checkPaths(ins(modelInput(in), []string{*goldenPath, *promptsPath, *calib}), []string{out, prunedOut, *saveGolden, *report}, nil); err != nil {
		return err
	}

	m, err := model.Open(in)
	if err != nil {
		return err
	}
	defer m.Close()
	tokMD, err := tokenizer.ModelMetadata(m)
	if err != nil {
		return err
	}
	encode := promptEncoder(m, in)
	o := study.Options{
		Source: in, Out: out, PrunedOut: prunedOut, Sparse: opt,
		GoldenPath: *goldenPath, SourceFingerprint: *sourceFP, Steps: *steps, SaveGolden: *saveGolden,
		Quantize: quantize.Options{Recipe: recipe, Overrides: rules, Workers: *threads, Metadata: tokMD},
		Threads:  *threads,
	}
	if method == sparse.Wanda {
		data, err := os.ReadFile(*calib)
		if err != nil {
			return err
		}
		if o.Calib, err = golden.ParsePrompts(data, *calib, encode); err != nil {
			return err
		}
	}
	if *goldenPath != "" {
		if o.Golden, err = golden.Read(*goldenPath); err != nil {
			return err
		}
	} else if o.Prompts, err = sparsifyPrompts(*promptsPath, encode, m.Config.BOS); err != nil {
		return err
	}
	bar := newProgress("sparsify", *asJSON)
	o.Quantize.Progress = bar.set
	res, err := study.Run(ctx, m, o)
	bar.finish()
	if err != nil {
		return err
	}

	b, _ := json.MarshalIndent(res, "", "  ")
	if *report != "" {
		if err := atomicfile.WriteFile(*report, append(b, '\n')); err != nil {
			return err
		}
	}
	if *asJSON {
		fmt.Println(string(b))
		return nil
	}
	printSparsify(os.Stdout, res)
	return nil
}

// promptEncoder returns the model's tokenizer as an encode function (BOS
// added as the vocabulary asks), or nil without a tokenizer.
func promptEncoder(m *model.Model, path string) func(string) ([]int32, error) {
	tok, err := tokenizer.ForModel(m, path)
	if err != nil {
		return nil
	}
	return func(s string) ([]int32, error) { return tok.Encode(s, true), nil }
}

// sparsifyPrompts reads --prompts, or falls back to sparsifyDefaultPrompts (or BOS
// alone without a tokenizer).
func sparsifyPrompts(path string, encode func(string) ([]int32, error), bos int) ([]golden.Prompt, error) {
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return golden.ParsePrompts(data, path, encode)
	}
	if encode == nil {
		if bos < 0 {
			return nil, fmt.Errorf("the model has no tokenizer and no BOS token: give --prompts or --golden")
		}
		return []golden.Prompt{{Name: "bos", IDs: []int32{int32(bos)}}}, nil
	}
	var ps []golden.Prompt
	for i, text := range sparsifyDefaultPrompts {
		ids, err := encode(text)
		if err != nil {
			return nil, err
		}
		ps = append(ps, golden.Prompt{Name: fmt.Sprintf("default %d", i+1), Text: text, IDs: ids})
	}
	return ps, nil
}

func printSparsify(w io.Writer, r *study.Result) {
	rep := r.Sparsity
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tensor\tdims\ttarget\tzeroed\tsparsity\teffective\t")
	for _, t := range rep.Tensors {
		eff := "-"
		if t.Effective != nil {
			eff = fmt.Sprintf("%.4f", *t.Effective)
		}
		fmt.Fprintf(tw, "%s\t%v\t%.4f\t%d\t%.4f\t%s\t\n", t.Name, t.Dims, t.Target, t.Zeroed, t.Sparsity, eff)
	}
	tw.Flush()
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	lost := 0
	for _, t := range rep.Tensors {
		if t.Note != "" {
			if lost == 0 {
				fmt.Fprintf(w, "note: %s: %s\n", t.Name, t.Note)
			}
			lost++
		}
	}
	if lost > 1 {
		fmt.Fprintf(w, "note: and %d more tensors like it\n", lost-1)
	}
	fmt.Fprintf(w, "%s → %s: pattern %s (%s), recipe %s\n", r.Source, r.Output, rep.Pattern, rep.Method, r.Recipe)
	fmt.Fprintf(w, "sparsity %.4f over %d weights of %d tensors (%.4f of the model); after quantization %.4f; %d weight bytes\n",
		rep.Sparsity, rep.Elements, len(rep.Tensors), rep.ModelSparsity, r.Effective, r.WeightBytes)
	if rep.Removed != nil {
		fmt.Fprintf(w, "structures removed: %.4f of the %ss\n", rep.StructureSparsity, rep.Pattern)
	}
	if p := r.Pruned; p != nil {
		where := "(not written; use --prune)"
		if p.Output != "" {
			where = "→ " + p.Output
		}
		fmt.Fprintf(w, "pruned model %s: hidden %d, heads %d, ffn %d, layers %d; %d weight bytes, %d saved (%.1f%%)\n",
			where, p.Config.Hidden, p.Config.Heads, p.Config.FFN, p.Config.Layers, p.WeightBytes, p.SavedBytes,
			100*float64(p.SavedBytes)/float64(max(r.WeightBytes, 1)))
		if len(p.Fallbacks) > 0 {
			fmt.Fprintf(w, "note: %d pruned tensors take a wider type, e.g. %s\n", len(p.Fallbacks), p.Fallbacks[0])
		}
	}
	fmt.Fprintf(w, "\nquality against %s:\n", r.Golden)
	if r.GoldenSource != nil && r.GoldenSource.Rule == golden.RuleOverride {
		fmt.Fprintf(w, "golden accepted by %s\n", r.GoldenSource)
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\ttop-1\texact-match\tmatch-len\tcosine\tdegenerate\t")
	row := func(name string, s *golden.Summary) {
		if s == nil {
			return
		}
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%.1f\t%s\t%d/%d\t\n", name, s.Top1, s.MatchFraction,
			float64(s.Matched)/float64(max(s.Prompts, 1)), cosineCell(s.Cosine), s.Degenerate, s.Prompts)
	}
	row("dense+"+r.Recipe, r.Baseline)
	row("variant", r.Quality)
	if r.Pruned != nil {
		row("pruned", r.Pruned.Quality)
	}
	tw.Flush()
	for _, d := range r.Degenerate {
		fmt.Fprintln(w, "degeneration:", d)
	}
	for _, d := range r.Divergence {
		fmt.Fprintln(w, "first divergence:", d)
	}
}

func cosineCell(c *float64) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%.5f", *c)
}
