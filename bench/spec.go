package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

// The speculative rows. Every speculative path bench knows decodes the
// same text prompt: the whole-model engine with the draft (a draft model,
// the target's first layers or an EAGLE-3 head) at each K, and each plan's
// dialog through the staged runtime as Genie runs it (spd with the draft
// model, ssd-q1 with the forecast embeddings, eaglet with the EAGLE-3
// head). A row's verdict is that its
// speculative tokens equal its path's greedy tokens and, with the sanity
// check, that those equal the untimed reference engine's; its device
// column is what qnnpack.EstimateSpec (qnnprep estimate) predicts from the
// row's measured acceptance.

// DeviceEstimate is a speculative row's device speed as `qnnprep
// estimate` computes it from the row's acceptance: `estimate --plan PLAN
// --device FILE --acceptance A` for a row with a plan, `estimate
// --weights-bytes B --device FILE -k K --acceptance A` for the
// whole-model rows (B: the model's default plan) give the same numbers.
type DeviceEstimate struct {
	Name        string  `json:"name"`         // the device profile's
	WeightBytes float64 `json:"weight_bytes"` // streamed once per window
	K           int     `json:"k"`            // proposals per window
	Positions   int     `json:"positions"`    // target positions per window
	DraftSteps  int     `json:"draft_steps"`  // draft steps per window
	Acceptance  float64 `json:"acceptance"`   // the row's acceptance length
	WindowMs    float64 `json:"window_ms"`
	// TokensPerSec is the speculative decode's estimate, GreedyTokensPerSec
	// plain decoding's (K = 0) on the same device and weights.
	TokensPerSec       float64 `json:"tokens_per_s"`
	GreedyTokensPerSec float64 `json:"greedy_tokens_per_s"`
}

func (o *Options) resolveSpec() error {
	if o.ForecastPath != "" && len(o.Plans) == 0 {
		return errors.New("bench: forecast embeddings are for an ssd-q1 plan: give one")
	}
	if o.Device != nil && !o.speculative() {
		return errors.New("bench: the device column is for speculative rows: give a draft or a plan")
	}
	return nil
}

// specPlan is a plan whose dialog bench measures.
type specPlan struct {
	path     string
	p        *shard.Plan
	forecast []float32 // ssd-q1's forecast-token rows
	cl       int       // the largest CL: the staged engine's context
}

// readSpecPlans reads opt.Plans for m and checks each dialog has what it
// drafts with: spd a draft model, ssd-q1 the forecast embeddings, eaglet
// an EAGLE-3 head.
func readSpecPlans(m *model.Model, opt *Options, draftModel, eagle3 bool) ([]*specPlan, error) {
	var out []*specPlan
	ssd := false
	for _, path := range opt.Plans {
		p, err := shard.ReadPlan(path)
		if err != nil {
			return nil, err
		}
		sp := &specPlan{path: path, p: p}
		for _, v := range p.Variants {
			sp.cl = max(sp.cl, v.CL)
		}
		switch d := &p.Dialog; d.Type {
		case shard.SPD:
			if !draftModel {
				return nil, fmt.Errorf("bench: plan %s: the spd dialog drafts with a draft model: give --draft MODEL or --draft-layers N", path)
			}
		case shard.SSD:
			if opt.ForecastPath == "" {
				return nil, fmt.Errorf("bench: plan %s: the ssd-q1 dialog needs its forecast embeddings (--forecast-embeddings FILE)", path)
			}
			if sp.forecast, err = model.ReadForecastEmbeddings(opt.ForecastPath, m.Config.Hidden, d.ForecastTokenCount); err != nil {
				return nil, fmt.Errorf("bench: plan %s: %w", path, err)
			}
			ssd = true
		case shard.Eaglet:
			if !eagle3 {
				return nil, fmt.Errorf("bench: plan %s: the eaglet dialog drafts with the plan's EAGLE-3 head: give --draft HEAD", path)
			}
		default:
			return nil, fmt.Errorf("bench: plan %s: dialog %q is not speculative through the staged runtime (want spd, ssd-q1 or eaglet)", path, d.Type)
		}
		out = append(out, sp)
	}
	if opt.ForecastPath != "" && !ssd {
		return nil, fmt.Errorf("bench: forecast embeddings %s: no ssd-q1 plan given", opt.ForecastPath)
	}
	return out, nil
}

// specBench measures every speculative path of one model.
type specBench struct {
	opt     *Options
	m       *model.Model
	draft   *model.Model // draft model or truncated draft; nil for EAGLE-3 or none
	eagle3  string       // EAGLE-3 head path
	drafter string       // what drafts the whole-model and spd rows
	plans   []*specPlan
	prompt  []int32 // depth fill + the text
	want    []int32 // the reference engine's greedy tokens; nil without sanity
	need    int     // engine context
	// bytes is the device weight bytes of the whole-model rows: the
	// model's default plan's (qnnprep plan MODEL).
	bytes float64
}

// specPath is one way of decoding the prompt greedily and speculatively.
type specPath struct {
	dialog, plan, drafter string
	greedy                func(ctx context.Context, prompt []int32, n int, fn func(runtime.Step) bool) error
	speculate             func(ctx context.Context, d runtime.Drafter, prompt []int32, n, k int) ([]int32, runtime.SpecStats, error)
	newDrafter            func() (runtime.Drafter, error)
	// window is the device window of a row with K proposals and the
	// measured acceptance; bytes its weights.
	window func(k int, acceptance float64) (qnnpack.Spec, error)
	bytes  float64
}

// run measures every path on the engines of one thread count: e is the
// timed whole-model engine (its fault applied by the caller).
func (b *specBench) run(ctx context.Context, e *runtime.Engine, threads int) ([]SpecResult, error) {
	opt := b.opt
	ropt := runtime.Options{Threads: threads, Context: b.need, Batch: opt.Batch, KVF16: opt.KVF16}
	var de *runtime.Engine
	switch {
	case b.draft != nil && b.draft == b.m:
		// --draft naming the model's own file: the timed engine drafts
		// for itself (runtime.OpenDrafts does the same), one engine over
		// the one mapping.
		de = e
	case b.draft != nil:
		var err error
		if de, err = runtime.New(b.draft, ropt); err != nil {
			return nil, err
		}
	}
	var out []SpecResult
	if b.draft != nil || b.eagle3 != "" {
		newDrafter := func() (runtime.Drafter, error) { return runtime.NewDraftModel(e, de) }
		if b.eagle3 != "" {
			head, err := runtime.OpenEagle3(e, b.eagle3)
			if err != nil {
				return nil, err
			}
			defer head.Close()
			newDrafter = func() (runtime.Drafter, error) { return head.Drafter(), nil }
		}
		p := specPath{
			drafter: b.drafter,
			greedy: func(ctx context.Context, prompt []int32, n int, fn func(runtime.Step) bool) error {
				return e.NewState().Generate(ctx, prompt, n, fn)
			},
			speculate:  e.Speculate,
			newDrafter: newDrafter,
			window: func(k int, acc float64) (qnnpack.Spec, error) {
				return qnnpack.ChainSpec(k, acc), nil
			},
			bytes: b.bytes,
		}
		res, err := b.measure(ctx, p, opt.K, threads)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	for _, sp := range b.plans {
		res, err := b.runPlan(ctx, sp, ropt, de)
		if err != nil {
			return nil, fmt.Errorf("bench: plan %s: %w", sp.path, err)
		}
		out = append(out, res...)
	}
	return out, nil
}

// runPlan measures sp's dialog through the staged runtime, on an engine of
// its own whose context holds the plan's largest CL (the staged executor
// keeps every variant's cache surfaces), faulted like the other timed
// engines.
func (b *specBench) runPlan(ctx context.Context, sp *specPlan, ropt runtime.Options, de *runtime.Engine) ([]SpecResult, error) {
	ropt.Context = max(ropt.Context, sp.cl)
	se, err := runtime.New(b.m, ropt)
	if err != nil {
		return nil, err
	}
	if b.opt.Fault != nil {
		defer b.opt.Fault.apply(se)()
	}
	st, err := runtime.NewStaged(se, sp.p)
	if err != nil {
		return nil, err
	}
	d := &sp.p.Dialog
	p := specPath{
		dialog: string(d.Type), plan: sp.path,
		greedy: func(ctx context.Context, prompt []int32, n int, fn func(runtime.Step) bool) error {
			_, err := st.Generate(ctx, prompt, n, fn)
			return err
		},
		window: func(_ int, acc float64) (qnnpack.Spec, error) { return qnnpack.DialogSpec(sp.p, acc) },
		bytes:  qnnpack.PlanWeightBytes(sp.p),
	}
	var k int
	switch d.Type {
	case shard.SPD:
		k, p.drafter, p.speculate = d.DraftLen, b.drafter, st.Speculate
		p.newDrafter = func() (runtime.Drafter, error) { return runtime.NewDraftModel(se, de) }
	case shard.SSD:
		// The forecast prefix is the placeholder's zeros, as build's
		// verification decodes it: it changes only what is drafted.
		k, p.drafter = d.Nodes-1, "forecast "+b.opt.ForecastPath
		p.speculate = runtime.SSDSpeculator{Staged: st, Options: runtime.SSDOptions{Forecast: sp.forecast}}.Speculate
		p.newDrafter = func() (runtime.Drafter, error) { return nil, nil }
	case shard.Eaglet:
		// The head binds to the staged engine, whose plan's last stage
		// applies its fc; the dialog drafts its own tree.
		head, err := runtime.OpenEagle3(se, b.eagle3)
		if err != nil {
			return nil, err
		}
		defer head.Close()
		if err := st.SetEagle3(head); err != nil { // greedy decodes need the fc too
			return nil, err
		}
		k, p.drafter = d.DraftLen, b.drafter
		p.speculate = func(ctx context.Context, _ runtime.Drafter, prompt []int32, n, _ int) ([]int32, runtime.SpecStats, error) {
			return st.SpeculateEaglet(ctx, head, prompt, n)
		}
		p.newDrafter = func() (runtime.Drafter, error) { return nil, nil }
	default:
		return nil, fmt.Errorf("dialog %q has no staged speculative path", d.Type)
	}
	return b.measure(ctx, p, []int{k}, ropt.Threads)
}

// measure times p's greedy decode and its speculative decode with each K
// on the prompt; both exclude the prompt's pass.
func (b *specBench) measure(ctx context.Context, p specPath, ks []int, threads int) ([]SpecResult, error) {
	opt, prompt, n := b.opt, b.prompt, b.opt.Gen
	greedy := make([]float64, 0, opt.Reps)
	var want []int32
	l0 := LoadAvg()[0]
	for rep := -1; rep < opt.Reps; rep++ {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var toks []int32
		var t1 time.Time
		err := p.greedy(ctx, prompt, n, func(s runtime.Step) bool {
			if s.Index == 0 {
				t1 = time.Now()
			}
			toks = append(toks, s.Token)
			return true
		})
		if err != nil {
			return nil, err
		}
		if rep >= 0 {
			greedy = append(greedy, time.Since(t1).Seconds())
		}
		want = toks
	}
	note := ""
	if b.want != nil {
		if d := tokenDiff(b.want, want); d != "" {
			note = "greedy differs from the reference: " + d
		}
	}
	gmean, _ := meanStd(greedy)
	what := "whole model"
	if p.dialog != "" {
		what = p.dialog + " through " + p.plan
	}
	opt.logf("qnnprep: %s, greedy after %d tokens, %d threads: %.2f tokens/s", what, len(prompt), threads, float64(n-1)/gmean)
	var out []SpecResult
	for _, k := range ks {
		r := SpecResult{Dialog: p.dialog, Plan: p.plan, Drafter: p.drafter, K: k, Threads: threads, Depth: len(prompt), Tokens: n, GreedyTokensPerSec: float64(n-1) / gmean}
		var secs, speedups []float64
		var st runtime.SpecStats
		rowNote := note
		for rep := -1; rep < opt.Reps; rep++ {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			d, err := p.newDrafter()
			if err != nil {
				return nil, err
			}
			got, s, err := p.speculate(ctx, d, prompt, n, k)
			if err != nil {
				return nil, err
			}
			if d := tokenDiff(want, got); d != "" && rowNote == "" {
				rowNote = "speculative differs from greedy: " + d
			}
			if rep >= 0 {
				secs = append(secs, s.Seconds)
				speedups = append(speedups, greedy[rep]/s.Seconds)
				st = s
			}
		}
		smean, _ := meanStd(secs)
		r.SpecTokensPerSec = float64(n-1) / smean
		r.Speedup, r.SpeedupStddev = meanStd(speedups)
		if st.Windows > 0 {
			r.WindowSeconds = smean / float64(st.Windows)
		}
		r.AcceptanceLength, r.AcceptanceRate, r.TargetCallsPerToken = st.AcceptanceLength(), st.AcceptanceRate(), st.TargetCallsPerToken()
		r.TokensPerWindow = st.TokensPerWindow()
		r.Load = (l0 + LoadAvg()[0]) / 2
		r.Sane, r.SanityNote = rowNote == "", rowNote
		if opt.Device != nil {
			var err error
			if r.Device, err = deviceEstimate(*opt.Device, p, k, r.AcceptanceLength); err != nil {
				return nil, err
			}
		}
		opt.logf("qnnprep: %s, speculative K=%d, %d threads: %.2f tokens/s, speed-up %.2f, acceptance length %.2f, %.3f target calls per token",
			what, k, threads, r.SpecTokensPerSec, r.Speedup, r.AcceptanceLength, r.TargetCallsPerToken)
		out = append(out, r)
	}
	return out, nil
}

// deviceEstimate is qnnpack.EstimateSpec of p's window with k proposals
// and the measured acceptance, and of plain decoding on the same weights.
func deviceEstimate(dev qnnpack.Device, p specPath, k int, acceptance float64) (*DeviceEstimate, error) {
	s, err := p.window(k, acceptance)
	if err != nil {
		return nil, err
	}
	w, err := qnnpack.EstimateSpec(dev, p.bytes, s, 1)
	if err != nil {
		return nil, err
	}
	g, err := qnnpack.EstimateSpec(dev, p.bytes, qnnpack.ChainSpec(0, 0), 1)
	if err != nil {
		return nil, err
	}
	return &DeviceEstimate{
		Name: dev.Name, WeightBytes: p.bytes, K: w.K, Positions: w.Positions, DraftSteps: w.DraftSteps, Acceptance: w.Acceptance,
		WindowMs: w.WindowMs, TokensPerSec: w.TokensPerSec, GreedyTokensPerSec: g.TokensPerSec,
	}, nil
}

// defaultPlanBytes is the device weight bytes of m's default plan (what
// `qnnprep plan MODEL` writes): the whole-model rows' device column.
func defaultPlanBytes(m *model.Model) (float64, error) {
	p, err := shard.PlanModel(m, shard.Options{})
	if err != nil {
		return 0, fmt.Errorf("bench: the device column of %s: %w", m.Path, err)
	}
	return qnnpack.PlanWeightBytes(p), nil
}

// tokenDiff says where got first differs from want ("" if nowhere).
func tokenDiff(want, got []int32) string {
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(got):
			return fmt.Sprintf("token %d is missing, want %d", i, want[i])
		case i >= len(want):
			return fmt.Sprintf("token %d is %d, past the end", i, got[i])
		case got[i] != want[i]:
			return fmt.Sprintf("token %d is %d, want %d", i, got[i], want[i])
		}
	}
	return ""
}
