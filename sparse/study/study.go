// Package study measures what structured sparsity costs a model: it writes
// a structured-zero variant (package sparse), quantizes it, decodes it
// against a golden file beside the dense model through the same recipe,
// and sizes the physically pruned model. It also compares finished
// variants against one golden.
//
// It is a package apart from sparse because it decodes (runtime) and
// verifies (golden), which come after sparse in the layering: sparse
// itself only rewrites tensors.
package study

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/sparse"
)

// Options says what variant to make and what to measure it against.
type Options struct {
	// Source is the dense model's path, for the report and for the
	// recorded golden's model reference.
	Source string
	// Out is where the quantized variant is written.
	Out string
	// PrunedOut, if set, is where the quantized pruned model is written
	// (structural patterns only); without it the pruned size is planned.
	PrunedOut string

	// Sparse is the pattern and selection. For wanda selection its
	// Activations are measured over Calib on the dense model.
	Sparse sparse.Options
	Calib  []golden.Prompt

	// Golden is the reference; GoldenPath names it in the report and
	// SourceFingerprint accepts it for a model made elsewhere (see
	// golden.File.Accept). Without a Golden, one is recorded from the
	// dense model over Prompts for Steps tokens each and, if SaveGolden
	// is set, written there.
	Golden            *golden.File
	GoldenPath        string
	SourceFingerprint string
	Prompts           []golden.Prompt
	Steps             int
	SaveGolden        string

	// Quantize writes the variant; the sparsity report's metadata is
	// added to its Metadata.
	Quantize quantize.Options
	// Threads decode.
	Threads int
}

// Result is the study's report.
type Result struct {
	Source      string         `json:"source"`
	Output      string         `json:"output"`
	Recipe      string         `json:"recipe"`
	Sparsity    *sparse.Report `json:"sparsity"`
	Effective   float64        `json:"effective_sparsity"` // exact zeros after quantization, over the tensors listed
	WeightBytes int64          `json:"weight_bytes"`       // tensor bytes of the written variant
	Pruned      *Pruned        `json:"pruned,omitempty"`
	Golden      string         `json:"golden"`
	// GoldenSource is why a given golden was accepted for the model.
	GoldenSource *golden.Acceptance `json:"golden_source,omitempty"`
	Quality      *golden.Summary    `json:"quality"`                   // variant vs the dense model's golden
	Baseline     *golden.Summary    `json:"dense_quantized,omitempty"` // dense model through the same recipe
	Findings
}

// Pruned describes the physically pruned model.
type Pruned struct {
	Output      string       `json:"output,omitempty"` // only with Options.PrunedOut
	Config      model.Config `json:"config"`
	WeightBytes int64        `json:"weight_bytes"`
	SavedBytes  int64        `json:"saved_bytes"` // weight bytes removing the structured zeros saves
	// Fallbacks lists pruned tensors whose new row length does not fit the
	// recipe's block and so take a wider type (they can cost bytes).
	Fallbacks []string        `json:"fallbacks,omitempty"`
	Quality   *golden.Summary `json:"quality,omitempty"`
}

// Findings collects per-prompt details of verifications.
type Findings struct {
	Degenerate []string `json:"degeneration,omitempty"`
	Divergence []string `json:"first_divergence,omitempty"`
}

// Run makes the variant of m, writes it quantized to o.Out and measures it:
// apply the pattern, take or record the golden, quantize, measure the
// effective sparsity, verify, verify the dense model through the same
// recipe (when it quantizes), and prune.
func Run(ctx context.Context, m *model.Model, o Options) (*Result, error) {
	dense, err := runtime.New(m, runtime.Options{Threads: o.Threads})
	if err != nil {
		return nil, err
	}
	opt := o.Sparse
	if opt.Method == sparse.Wanda {
		if opt.Activations, err = calibrateWanda(ctx, dense, o.Calib); err != nil {
			return nil, err
		}
	}
	v, err := sparse.Apply(m, opt)
	if err != nil {
		return nil, err
	}
	// The golden: given, or recorded from the dense model (after Apply,
	// so that a bad pattern fails before any decoding).
	g := o.Golden
	var src *golden.Acceptance
	if g != nil {
		if src, err = g.Accept(m, o.SourceFingerprint); err != nil {
			return nil, fmt.Errorf("%s against %s: %w", o.Source, o.GoldenPath, err)
		}
	} else if g, err = record(ctx, m, dense, o); err != nil {
		return nil, err
	}

	qopt := o.Quantize
	res := &Result{Source: o.Source, Output: o.Out, Recipe: qopt.Recipe.Name, Sparsity: v.Report, Golden: o.GoldenPath, GoldenSource: src}
	if o.Golden == nil {
		res.Golden = "recorded from " + o.Source
	}
	qopt.Metadata = append(qopt.Metadata[:len(qopt.Metadata):len(qopt.Metadata)], v.Report.Metadata()...)
	if _, err := quantize.Run(ctx, v.Model, o.Out, qopt); err != nil {
		return nil, err
	}
	qopt.Progress = nil
	qv, err := model.Open(o.Out)
	if err != nil {
		return nil, err
	}
	defer qv.Close()
	if err := v.Report.MeasureEffective(qv); err != nil {
		return nil, err
	}
	res.Effective = v.Report.EffectiveSparsity()
	res.WeightBytes = WeightBytes(qv)
	if res.Quality, err = Verify(ctx, qv, g, o.Threads, &res.Findings, "variant"); err != nil {
		return nil, err
	}

	if !qopt.Recipe.Keep || len(qopt.Overrides) > 0 {
		// The same recipe on the dense model separates the cost of
		// quantization from the cost of the zeros.
		if res.Baseline, err = denseBaseline(ctx, m, qopt, g, o.Threads); err != nil {
			return nil, err
		}
	}

	if opt.Pattern.Structural() {
		if res.Pruned, err = prune(ctx, v, qopt, g, o, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// record decodes o.Prompts with the dense model into a golden file and
// saves it if asked.
func record(ctx context.Context, m *model.Model, dense *runtime.Engine, o Options) (*golden.File, error) {
	g, err := golden.Record(ctx, dense, o.Prompts, o.Steps, 8)
	if err != nil {
		return nil, err
	}
	sha, err := quantize.SourceFingerprint(m)
	if err != nil {
		return nil, err
	}
	g.Model = golden.ModelRef{Path: o.Source, Arch: string(m.Config.Arch), SHA256: sha}
	if o.SaveGolden != "" {
		if err := golden.Write(o.SaveGolden, g); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// prune removes the variant's zeroed structures and sizes the smaller
// model: written and verified with o.PrunedOut, planned without.
func prune(ctx context.Context, v *sparse.Variant, qopt quantize.Options, g *golden.File, o Options, res *Result) (*Pruned, error) {
	pm, err := v.Prune()
	if err != nil {
		return nil, err
	}
	pr := &Pruned{Config: pm.Config}
	ds, err := quantize.Plan(pm, qopt)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.Fallback {
			pr.Fallbacks = append(pr.Fallbacks, d.Name+": "+d.Reason)
		}
	}
	if o.PrunedOut != "" {
		pr.Output = o.PrunedOut
		if _, err := quantize.Run(ctx, pm, pr.Output, qopt); err != nil {
			return nil, err
		}
		qp, err := model.Open(pr.Output)
		if err != nil {
			return nil, err
		}
		defer qp.Close()
		pr.WeightBytes = WeightBytes(qp)
		if pr.Quality, err = Verify(ctx, qp, g, o.Threads, &res.Findings, "pruned"); err != nil {
			return nil, err
		}
	} else if pr.WeightBytes, err = plannedBytes(pm, qopt); err != nil {
		return nil, err
	}
	pr.SavedBytes = res.WeightBytes - pr.WeightBytes
	return pr, nil
}

// calibrateWanda runs the prompts through e and returns the input-column
// norms of every matrix product.
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

// Verify decodes g's prompts with m and summarises the comparison;
// degenerations and first divergences are appended to f with the label.
func Verify(ctx context.Context, m *model.Model, g *golden.File, threads int, f *Findings, label string) (*golden.Summary, error) {
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
	path := filepath.Join(dir, "dense.gguf")
	if _, err := quantize.Run(ctx, m, path, qopt); err != nil {
		return nil, err
	}
	qd, err := model.Open(path)
	if err != nil {
		return nil, err
	}
	defer qd.Close()
	var ignore Findings
	return Verify(ctx, qd, g, threads, &ignore, "dense")
}

// WeightBytes is the total size of m's tensors.
func WeightBytes(m *model.Model) int64 {
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
