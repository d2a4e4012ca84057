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
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/sparse"
)

// sparsifyDefaultPrompts are used for the golden comparison when neither --golden
// nor --prompts is given (and the model has a tokenizer).
var sparsifyDefaultPrompts = []string{"Once upon a time", "The little dog", "One day, a girl named", "Tom had a big"}

// sparsifyResult is the JSON report of `qnnprep sparsify`.
type sparsifyResult struct {
	Source      string         `json:"source"`
	Output      string         `json:"output"`
	Recipe      string         `json:"recipe"`
	Sparsity    *sparse.Report `json:"sparsity"`
	Effective   float64        `json:"effective_sparsity"` // exact zeros after quantization, over the tensors listed
	WeightBytes int64          `json:"weight_bytes"`       // tensor bytes of the written variant
	Pruned      *prunedResult  `json:"pruned,omitempty"`
	Golden      string         `json:"golden"`
	// GoldenSource is why a --golden was accepted for the model.
	GoldenSource *golden.Acceptance `json:"golden_source,omitempty"`
	Quality      *golden.Summary    `json:"quality"`                   // variant vs the dense model's golden
	Baseline     *golden.Summary    `json:"dense_quantized,omitempty"` // dense model through the same recipe
	findings
}

type prunedResult struct {
	Output      string       `json:"output,omitempty"` // only with --prune
	Config      model.Config `json:"config"`
	WeightBytes int64        `json:"weight_bytes"`
	SavedBytes  int64        `json:"saved_bytes"` // weight bytes removing the structured zeros saves
	// Fallbacks lists pruned tensors whose new row length does not fit the
	// recipe's block and so take a wider type (they can cost bytes).
	Fallbacks []string        `json:"fallbacks,omitempty"`
	Quality   *golden.Summary `json:"quality,omitempty"`
}

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
	recipeName := fs.String("recipe", "keep", "quantization recipe for the written variant: "+fmt.Sprint(quantize.RecipeNames()))
	overrides := fs.StringArray("override", nil, "quantization override PATTERN=TYPE (as in quantize); repeatable")
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
	recipe, err := quantize.LookupRecipe(*recipeName)
	if err != nil {
		return usageError("%v", err)
	}
	var rules []quantize.Rule
	for _, o := range *overrides {
		r, err := quantize.ParseOverride(o)
		if err != nil {
			return usageError("%v", err)
		}
		rules = append(rules, r)
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
	tokMD, err := tokenizerMetadata(m)
	if err != nil {
		return err
	}
	encode := promptEncoder(m, in)
	dense, err := runtime.New(m, runtime.Options{Threads: *threads})
	if err != nil {
		return err
	}

	if method == sparse.Wanda {
		data, err := os.ReadFile(*calib)
		if err != nil {
			return err
		}
		prompts, err := golden.ParsePrompts(data, *calib, encode)
		if err != nil {
			return err
		}
		if opt.Activations, err = calibrateWanda(ctx, dense, prompts); err != nil {
			return err
		}
	}
	v, err := sparse.Apply(m, opt)
	if err != nil {
		return err
	}
	// The golden: given, or recorded from the dense model (after
	// Apply, so that a bad pattern fails before any decoding).
	var g *golden.File
	var src *golden.Acceptance
	if *goldenPath != "" {
		if g, err = golden.Read(*goldenPath); err != nil {
			return err
		}
		if src, err = g.Accept(m, *sourceFP); err != nil {
			return fmt.Errorf("%s against %s: %w", in, *goldenPath, err)
		}
	} else {
		prompts, err := sparsifyPrompts(*promptsPath, encode, m.Config.BOS)
		if err != nil {
			return err
		}
		if g, err = golden.Record(ctx, dense, prompts, *steps, 8); err != nil {
			return err
		}
		sha, err := quantize.SourceFingerprint(m)
		if err != nil {
			return err
		}
		g.Model = golden.ModelRef{Path: in, Arch: string(m.Config.Arch), SHA256: sha}
		if *saveGolden != "" {
			if err := golden.Write(*saveGolden, g); err != nil {
				return err
			}
		}
	}

	res := &sparsifyResult{Source: in, Output: out, Recipe: recipe.Name, Sparsity: v.Report, Golden: *goldenPath, GoldenSource: src}
	if res.Golden == "" {
		res.Golden = "recorded from " + in
	}
	md := append(tokMD[:len(tokMD):len(tokMD)], v.Report.Metadata()...)
	qopt := quantize.Options{Recipe: recipe, Overrides: rules, Workers: *threads, Metadata: md}
	bar := newProgress("sparsify", *asJSON)
	qopt.Progress = bar.set
	_, err = quantize.Run(ctx, v.Model, out, qopt)
	bar.finish()
	if err != nil {
		return err
	}
	qv, err := model.Open(out)
	if err != nil {
		return err
	}
	defer qv.Close()
	if err := v.Report.MeasureEffective(qv); err != nil {
		return err
	}
	res.Effective = v.Report.EffectiveSparsity()
	res.WeightBytes = modelWeightBytes(qv)
	if res.Quality, err = verifyVariant(ctx, qv, g, *threads, &res.findings, "variant"); err != nil {
		return err
	}

	if !recipe.Keep || len(rules) > 0 {
		// The same recipe on the dense model separates the cost of
		// quantization from the cost of the zeros.
		if res.Baseline, err = denseBaseline(ctx, m, qopt, g, *threads); err != nil {
			return err
		}
	}

	if pat.Structural() {
		pm, err := v.Prune()
		if err != nil {
			return err
		}
		pr := &prunedResult{Config: pm.Config}
		ds, err := quantize.Plan(pm, qopt)
		if err != nil {
			return err
		}
		for _, d := range ds {
			if d.Fallback {
				pr.Fallbacks = append(pr.Fallbacks, d.Name+": "+d.Reason)
			}
		}
		if *prune {
			pr.Output = prunedOut
			popt := qopt
			popt.Progress = nil
			if _, err := quantize.Run(ctx, pm, pr.Output, popt); err != nil {
				return err
			}
			qp, err := model.Open(pr.Output)
			if err != nil {
				return err
			}
			defer qp.Close()
			pr.WeightBytes = modelWeightBytes(qp)
			if pr.Quality, err = verifyVariant(ctx, qp, g, *threads, &res.findings, "pruned"); err != nil {
				return err
			}
		} else if pr.WeightBytes, err = plannedBytes(pm, qopt); err != nil {
			return err
		}
		pr.SavedBytes = res.WeightBytes - pr.WeightBytes
		res.Pruned = pr
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
	tok, err := loadTokenizer(m, path)
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

// calibrate runs the prompts through e and returns the input-column norms
// of every matrix product.
func calibrateWanda(ctx context.Context, e *runtime.Engine, prompts []golden.Prompt) (sparse.Activations, error) {
	rec := sparse.NewActivationRecorder()
	stop := e.Observe(rec.Observe)
	defer stop()
	for _, p := range prompts {
		ids := p.IDs
		if len(ids) > e.ContextLength() {
			ids = ids[:e.ContextLength()]
		}
		if _, err := e.Logits(ctx, ids); err != nil {
			return nil, fmt.Errorf("calibration prompt %s: %w", p.Name, err)
		}
	}
	return rec.Activations()
}

// verifySummary decodes g's prompts with m and summarises the comparison;
// degenerations are appended to degen with the label.
// findings collects per-prompt details of verifications.
type findings struct {
	Degenerate []string `json:"degeneration,omitempty"`
	Divergence []string `json:"first_divergence,omitempty"`
}

func verifyVariant(ctx context.Context, m *model.Model, g *golden.File, threads int, f *findings, label string) (*golden.Summary, error) {
	e, err := runtime.New(m, runtime.Options{Threads: threads, KVF16: g.Settings.KVF16})
	if err != nil {
		return nil, err
	}
	if err := g.CheckContext(e.ContextLength()); err != nil {
		return nil, err
	}
	r, err := golden.Verify(ctx, golden.EngineDecoder(e), g, golden.Criteria{})
	if err != nil {
		return nil, err
	}
	for _, p := range r.Prompts {
		if p.Degeneration != nil {
			f.Degenerate = append(f.Degenerate, fmt.Sprintf("%s, prompt %s: %s", label, p.Name, p.Degeneration))
		}
		if d := p.Divergence; d != nil {
			f.Divergence = append(f.Divergence, fmt.Sprintf("%s, prompt %s: step %d, expected %d, got %d", label, p.Name, d.Step, d.Expected, d.Got))
		}
	}
	return &r.Summary, nil
}

// denseBaseline quantizes the dense model with the variant's options into a
// temporary file and verifies it.
func denseBaseline(ctx context.Context, m *model.Model, qopt quantize.Options, g *golden.File, threads int) (*golden.Summary, error) {
	dir, err := os.MkdirTemp("", "qnnprep-sparsify-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	qopt.Progress = nil
	path := filepath.Join(dir, "dense.gguf")
	if _, err := quantize.Run(ctx, m, path, qopt); err != nil {
		return nil, err
	}
	qd, err := model.Open(path)
	if err != nil {
		return nil, err
	}
	defer qd.Close()
	var ignore findings
	return verifyVariant(ctx, qd, g, threads, &ignore, "dense")
}

// weightBytes is the total size of m's tensors.
func modelWeightBytes(m *model.Model) int64 {
	var n int64
	for _, t := range m.Tensors {
		n += t.Bytes()
	}
	return n
}

// plannedBytes is the size m's tensors would have under the quantization
// options, decided without reading any data.
func plannedBytes(m *model.Model, qopt quantize.Options) (int64, error) {
	ds, err := quantize.Plan(m, qopt)
	if err != nil {
		return 0, err
	}
	var n int64
	for i, t := range m.Tensors {
		rb, err := ds[i].Kind.Type.RowBytes(t.Dims[0])
		if err != nil {
			return 0, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		n += rb * t.Rows()
	}
	return n, nil
}

func printSparsify(w io.Writer, r *sparsifyResult) {
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
