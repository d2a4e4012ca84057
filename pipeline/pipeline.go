// Package pipeline runs qnnprep end to end: quantize a source model into a
// qmodel, plan its stages, check the plan against Genie's contract, export
// every stage graph to ONNX with QNN encodings, drive the QAIRT SDK (or print
// its commands) into a Genie bundle, and verify by decoding: the qmodel whole
// and through the plan, against a golden recorded from the source.
//
// Steps: quantize, plan, check, export (with calibration), simulate, draft
// (spd: the draft model; eaglet: the EAGLE-3 head's draft graphs), sdk,
// bundle, verify. Simulate decodes the qmodel through the
// plan with the exported encodings simulated (SimulateEncodings) against
// its float decode. Verify records a golden from the source (greedy continuations and
// top-k logits of a few prompts), decodes the qmodel whole against it (the
// quantization's quality: top-1 agreement, exact-match length) and through
// the plan with the runtime's staged executor, which must give the whole
// model's tokens exactly; for spd also speculatively with the draft, for
// ssd-q1 and eaglet with the dialog's own drafting through the plan.
//
// Everything goes under one output directory:
//
//	OUTDIR/work/qmodel.gguf           the quantized model
//	OUTDIR/work/plan.json             the shard plan
//	OUTDIR/work/onnx/                 <graph>.onnx and <graph>.encodings.json
//	OUTDIR/work/ranges.json           the calibration's activation ranges (onnx.Calibration)
//	OUTDIR/work/sdk/                  DLCs, compile configs, context binaries, logs, cache
//	OUTDIR/work/sdk_commands.sh       dry run: the SDK commands as a script (set QNN_SDK_ROOT, run)
//	OUTDIR/work/draft/                the draft engine: qmodel (spd only), plan, ONNX, SDK work and bundle
//	OUTDIR/work/golden.json           the source model's greedy continuations
//	OUTDIR/bundle/                    the Genie bundle (renamed into place when complete)
//	OUTDIR/summary.json               the Result
//
// Each file is written under a temporary name and renamed when complete, so
// an interrupted run leaves nothing that looks finished; the SDK tools run in
// their own process groups and are killed when ctx is cancelled.
//
// Beside Build, the package holds the workflows of the commands around it:
// SourceOptions (what build and demo derive from a source: tokenizer
// metadata, bundle tokenizer, verify prompts), RunDemo (qnnprep demo:
// synthetic or given models built with both recipes and verified), Export
// (qnnprep export onnx: plan checks, ranges and calibration around
// onnx.ExportContext), VerifyArtifact (qnnprep verify: an artifact against
// a golden file whole, through a plan, speculatively and with its exported
// encodings simulated), Calibrate (activation ranges for export and build)
// and SimulateEncodings (the simulate step).
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

// Build runs every step. It returns the Result so far together with a
// *StepError when a step fails; a verification whose staged decode differs
// from the whole model is not an error (see Result.Pass).
func Build(ctx context.Context, o Options) (*Result, error) {
	if o.Recipe == nil {
		return nil, errors.New("pipeline: no recipe")
	}
	if o.OutDir == "" {
		return nil, errors.New("pipeline: no output directory")
	}
	if _, err := qnnpack.LookupSoC(o.SoC); err != nil {
		return nil, err
	}
	if spd := o.Plan.Dialog.Type == shard.SPD; spd != (o.Draft != nil) {
		if spd {
			return nil, &StepError{StepPlan, errors.New("dialog spd needs a draft model (--draft MODEL)")}
		}
		return nil, &StepError{StepPlan, fmt.Errorf("a draft model is only used by dialog spd, not %q", o.Plan.Dialog.Type)}
	}
	if eaglet := o.Plan.Dialog.Type == shard.Eaglet; eaglet != (o.Eagle3 != "") {
		if eaglet {
			return nil, &StepError{StepPlan, errors.New("dialog eaglet needs an EAGLE-3 head (--eagle3 HEAD)")}
		}
		return nil, &StepError{StepPlan, fmt.Errorf("an EAGLE-3 head is only used by dialog eaglet, not %q", o.Plan.Dialog.Type)}
	}
	// OutDir is qnnprep's: refused if it (or its bundle) holds anything
	// else, claimed before anything is written into it.
	if err := atomicfile.CheckOwned(filepath.Join(o.OutDir, BundleDir)); err != nil {
		return nil, err
	}
	if err := atomicfile.Claim(o.OutDir, WorkDir, BundleDir, SummaryName); err != nil {
		return nil, err
	}
	b := &builder{o: o, ctx: ctx, work: filepath.Join(o.OutDir, WorkDir)}
	b.res = &Result{Source: o.Source, OutDir: o.OutDir, Recipe: o.Recipe.Name, SoC: o.SoC, DryRun: o.DryRun || o.SDK == nil}
	for _, s := range Steps {
		if s == StepSDK && (o.Draft != nil || o.Eagle3 != "") {
			b.res.Steps = append(b.res.Steps, StepResult{Name: StepDraft, Status: StatusNotRun})
		}
		b.res.Steps = append(b.res.Steps, StepResult{Name: s, Status: StatusNotRun})
	}
	// A bundle left by an earlier build into OutDir no longer stands for
	// this one, whatever happens next.
	if err := qnnpack.MarkIncomplete(filepath.Join(o.OutDir, BundleDir), "a newer qnnprep build into "+o.OutDir+" started and did not finish"); err != nil {
		return nil, err
	}
	err := b.run()
	if ferr := b.finishBundle(err); ferr != nil && err == nil {
		err = ferr
	}
	if werr := b.writeSummary(); werr != nil && err == nil {
		err = werr
	}
	return b.res, err
}

type builder struct {
	o    Options
	ctx  context.Context
	work string
	res  *Result

	src, qm *model.Model
	srcName string // the source's name (shard.ModelName)
	files   map[string]qnnpack.GraphFiles
	tok     *BundleTokenizer

	forecastRaw []float32 // ssd-q1 forecast rows as given
	forecast    []float32 // as the first stage's table holds them

	draft       *qnnpack.DraftModel // compiled draft (spd, eaglet)
	head        *runtime.Eagle3     // eaglet's EAGLE-3 head, bound to the qmodel
	draftQM     *model.Model
	draftJobs   []qnnpack.Job // dry run
	draftStages []qnnpack.StagePaths
}

// step runs f as the named step, timing it and recording its outcome.
func (b *builder) step(name string, f func(s *StepResult) error) error {
	s := b.res.Step(name)
	s.Status = ""
	if b.o.OnStep != nil {
		b.o.OnStep(*s)
	}
	start := time.Now()
	err := f(s)
	if err == nil {
		err = b.ctx.Err()
	}
	s.Seconds = time.Since(start).Seconds()
	if err != nil {
		s.Status = StatusFailed
	} else if s.Status == "" {
		s.Status = StatusOK
	}
	if b.o.OnStep != nil {
		b.o.OnStep(*s)
	}
	if err != nil {
		return &StepError{name, err}
	}
	return nil
}

func (b *builder) rel(path string) string {
	if r, err := filepath.Rel(b.o.OutDir, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}

func (b *builder) progress(step string) func(done, total int64) {
	if b.o.Progress == nil {
		return nil
	}
	return func(done, total int64) { b.o.Progress(step, done, total) }
}

func (b *builder) run() error {
	defer func() {
		if b.src != nil {
			b.src.Close()
		}
		if b.qm != nil {
			b.qm.Close()
		}
		if b.draftQM != nil {
			b.draftQM.Close()
		}
	}()
	for _, f := range []func() error{b.quantize, b.plan, b.check, b.export, b.simulate, b.buildDraft, b.sdkAndBundle, b.verify} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) quantize() error {
	return b.step(StepQuantize, func(s *StepResult) error {
		src, err := model.Open(b.o.Source)
		if err != nil {
			return err
		}
		b.src = src
		if err := b.readForecast(); err != nil {
			return err
		}
		if err := b.checkDraft(); err != nil {
			return err
		}
		// The bundle's tokenizer is settled first: without one there is
		// no point quantizing.
		md, err := b.bundleTokenizer(src)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(b.work, 0o755); err != nil {
			return err
		}
		out := filepath.Join(b.work, QModelName)
		rep, err := quantize.Run(b.ctx, src, out, quantize.Options{
			Recipe: b.o.Recipe, Overrides: b.o.Overrides, Workers: b.o.Threads,
			Metadata: specialTokens(md, src.Config), Progress: b.progress(StepQuantize),
		})
		if err != nil {
			return err
		}
		b.res.Quant, b.res.QModel = rep, out
		b.res.Bytes, b.res.BPW = rep.OutputBytes, rep.BPW
		if b.qm, err = model.Open(out); err != nil {
			return err
		}
		// Only verify reads the source again: without it, its mapping
		// (and, if the caller deletes it now, its disk space) goes.
		b.srcName = shard.ModelName(src)
		if b.o.NoVerify {
			src.Close()
			b.src = nil
		}
		s.Outputs = []string{b.rel(out)}
		s.Note = fmt.Sprintf("%s, %.3f bpw, %d bytes; tokenizer.json %s", rep.Recipe, rep.BPW, rep.OutputBytes, b.tokNote())
		if n := len(rep.Fallbacks); n > 0 {
			s.Note += fmt.Sprintf(", %d fallback(s)", n)
		}
		return nil
	})
}

// checkDraft opens the spd draft model (headers only) and checks its
// vocabulary against the target's before anything is built: the same
// size and, where both carry their tokens, the same tokens.
func (b *builder) checkDraft() error {
	d := b.o.Draft
	if d == nil {
		return nil
	}
	dm, err := model.Open(d.Source)
	if err != nil {
		return fmt.Errorf("draft: %w", err)
	}
	defer dm.Close()
	if err := CheckDraftVocab(b.src, dm); err != nil {
		return fmt.Errorf("draft %s: %w", d.Source, err)
	}
	return nil
}

// CheckDraftVocab reports whether draft can draft for target: Genie's spd
// dialog passes token ids between them unchanged, so the vocabularies
// must be the same size and, where both models carry their token lists
// (tokenizer.ggml.tokens), the same tokens.
func CheckDraftVocab(target, draft *model.Model) error {
	if n, m := draft.Config.VocabSize, target.Config.VocabSize; n != m {
		return fmt.Errorf("vocabulary of %d tokens, the target %s has %d: spd passes token ids between them unchanged", n, target.Path, m)
	}
	dt, ok1 := draft.Metadata.Strings("tokenizer.ggml.tokens")
	tt, ok2 := target.Metadata.Strings("tokenizer.ggml.tokens")
	if !ok1 || !ok2 {
		return nil
	}
	for i := range min(len(dt), len(tt)) {
		if dt[i] != tt[i] {
			return fmt.Errorf("token %d is %q, the target %s has %q: not the same vocabulary", i, dt[i], target.Path, tt[i])
		}
	}
	return nil
}

// readForecast reads the ssd-q1 forecast embeddings, checked against the
// source's hidden size and the dialog's forecast-token-count before
// anything is built.
func (b *builder) readForecast() error {
	d := b.o.Plan.Dialog
	switch {
	case d.Type != shard.SSD && b.o.ForecastEmbeddings != "":
		return fmt.Errorf("forecast embeddings are used by dialog ssd-q1 only, not %q", d.Type)
	case d.Type != shard.SSD:
		return nil
	case b.o.ForecastEmbeddings == "":
		return fmt.Errorf("dialog ssd-q1 needs its %d trained forecast-token embeddings of hidden size %d (--forecast-embeddings FILE, safetensors or GGUF)", d.ForecastTokenCount, b.src.Config.Hidden)
	}
	rows, err := model.ReadForecastEmbeddings(b.o.ForecastEmbeddings, b.src.Config.Hidden, d.ForecastTokenCount)
	if err != nil {
		return err
	}
	b.forecastRaw = rows
	return nil
}

func (b *builder) plan() error {
	return b.step(StepPlan, func(s *StepResult) error {
		opts := b.o.Plan
		sizes, err := shard.ModelSizes(b.qm, opts.Container)
		if err != nil {
			return err
		}
		name := b.o.Name
		if name == "" {
			name = b.srcName
		}
		if b.o.Eagle3 != "" {
			if opts.EagletHead, err = b.eagletHead(sizes.Container); err != nil {
				return err
			}
		}
		p, err := shard.NewPlan(b.qm.Config, sizes, name, opts)
		if err != nil {
			return err
		}
		path := filepath.Join(b.work, PlanName)
		if err := shard.WritePlan(path, p); err != nil {
			return err
		}
		b.res.Plan, b.res.PlanPath = p, path
		s.Outputs = []string{b.rel(path)}
		var dev, q int64
		for _, st := range p.Stages {
			dev, q = dev+st.Bytes, q+st.QModelBytes
		}
		s.Note = fmt.Sprintf("%d stages, %d graphs, split by %s; %d device bytes (%s container), %d in the qmodel", len(p.Stages), len(p.Graphs), p.Split, dev, p.Container, q)
		return nil
	})
}

func (b *builder) check() error {
	return b.step(StepCheck, func(s *StepResult) error {
		vs := shard.Check(b.res.Plan, shard.CheckEnv{StateRuntime: b.o.AllowRecurrentState})
		b.res.Violations = vs
		var state string
		if b.o.AllowRecurrentState {
			if b.res.RecurrentState = shard.StateTensors(b.res.Plan); len(b.res.RecurrentState) > 0 {
				state = fmt.Sprintf("; %s allowed: the bundle needs a runtime that feeds %d past_conv/past_ssm tensors back", shard.RuleRecurrent, len(b.res.RecurrentState))
			}
		}
		if len(vs) == 0 {
			s.Note = "Genie contract: no violations" + state
			return nil
		}
		s.Note = fmt.Sprintf("%d violation(s), first: %s", len(vs), vs[0])
		if b.o.SkipCheck {
			return nil
		}
		return fmt.Errorf("%s: %d Genie contract violation(s), first: %s — fix the plan flags, or --skip-check", b.res.PlanPath, len(vs), vs[0])
	})
}

func (b *builder) export() error {
	return b.step(StepExport, func(s *StepResult) error {
		if b.forecastRaw != nil {
			emb := b.qm.Tensor("token_embd.weight")
			if emb == nil {
				return fmt.Errorf("%s: no token_embd.weight for the forecast rows", b.res.QModel)
			}
			rows, err := onnx.ForecastRows(emb, b.res.Plan.Container, b.forecastRaw)
			if err != nil {
				return err
			}
			b.forecast = rows
		}
		dir := filepath.Join(b.work, ONNXDir)
		files, total, nranges, err := b.exportGraphs(b.qm, b.res.Plan, dir, StepExport)
		if err != nil {
			return err
		}
		b.files = files
		s.Outputs = []string{b.rel(dir) + "/"}
		if b.res.Ranges != "" {
			s.Outputs = append(s.Outputs, b.rel(b.res.Ranges))
		}
		s.Note = fmt.Sprintf("%d graphs, %d bytes", len(b.res.Plan.Graphs), total)
		if b.forecast != nil {
			s.Note += fmt.Sprintf(", %d forecast rows in the embedding table", len(b.forecast)/b.qm.Config.Hidden)
		}
		if nranges > 0 {
			s.Note += fmt.Sprintf(", %d calibrated ranges", nranges)
		}
		return nil
	})
}

// exportGraphs calibrates (if asked) and exports every graph of p for m
// into dir (the AR/CL variants of a stage share one weights file; a
// cancelled run leaves no partial file). It returns the graph files, the
// total size of the files written and the number of activation ranges
// used.
func (b *builder) exportGraphs(m *model.Model, p *shard.Plan, dir, step string) (map[string]qnnpack.GraphFiles, int64, int, error) {
	opts := b.o.Export
	if m == b.qm {
		opts.Forecast = b.forecast
		if b.head != nil {
			opts.Eagle3 = b.onnxHead()
		}
	}
	if b.o.Calibration != nil {
		r, err := b.calibrate(m, p, filepath.Join(filepath.Dir(dir), RangesName))
		if err != nil {
			return nil, 0, 0, err
		}
		merged := map[string]onnx.Range{}
		for k, v := range r {
			merged[k] = v
		}
		for k, v := range opts.Ranges {
			merged[k] = v
		}
		opts.Ranges = merged
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, 0, err
	}
	prog := b.progress(step)
	paths, err := onnx.ExportContext(b.ctx, m, p, dir, opts, func(i, n int, _ string) {
		if prog != nil {
			prog(int64(i), int64(n))
		}
	})
	if err != nil {
		return nil, 0, 0, err
	}
	var total int64
	for _, path := range paths {
		if st, err := os.Stat(path); err == nil {
			total += st.Size()
		}
	}
	if prog != nil {
		prog(int64(len(p.Graphs)), int64(len(p.Graphs)))
	}
	files, err := qnnpack.FindGraphFiles(p, dir)
	return files, total, len(opts.Ranges), err
}

// DraftDir is the draft model's work directory under OutDir/work.
const DraftDir = "draft"

// buildDraft quantizes, plans, checks and exports the spd draft model and,
// with an SDK, compiles it (into work/draft/bundle, whose context binaries
// the target's bundle takes).
func (b *builder) buildDraft() error {
	if b.head != nil {
		return b.step(StepDraft, b.buildEagletDraft)
	}
	d := b.o.Draft
	if d == nil {
		return nil
	}
	return b.step(StepDraft, func(s *StepResult) error {
		dir := filepath.Join(b.work, DraftDir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		src, err := model.Open(d.Source)
		if err != nil {
			return err
		}
		defer src.Close()
		qpath := filepath.Join(dir, QModelName)
		if _, err := quantize.Run(b.ctx, src, qpath, quantize.Options{
			Recipe: b.o.Recipe, Workers: b.o.Threads, Metadata: specialTokens(nil, src.Config),
		}); err != nil {
			return err
		}
		qm, err := model.Open(qpath)
		if err != nil {
			return err
		}
		b.draftQM = qm
		sizes, err := shard.ModelSizes(qm, b.res.Plan.Container)
		if err != nil {
			return err
		}
		opts := d.Plan
		if opts.Stages == 0 && opts.LayersPerStage == 0 {
			opts.Stages = 1
		}
		if opts.AR == nil && opts.CL == nil {
			for _, v := range b.res.Plan.Variants {
				if !slices.Contains(opts.AR, v.AR) {
					opts.AR = append(opts.AR, v.AR)
				}
				if !slices.Contains(opts.CL, v.CL) {
					opts.CL = append(opts.CL, v.CL)
				}
			}
		}
		opts.Dialog, opts.LayerTypes, opts.Container = shard.Dialog{}, sizes.LayerTypes, sizes.Container
		p, err := shard.NewPlan(qm.Config, sizes, b.res.Plan.Model.Name+"_draft", opts)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		ppath := filepath.Join(dir, PlanName)
		if err := shard.WritePlan(ppath, p); err != nil {
			return err
		}
		if vs := shard.Check(p, shard.CheckEnv{StateRuntime: b.o.AllowRecurrentState}); len(vs) > 0 && !b.o.SkipCheck {
			return fmt.Errorf("%s: %d Genie contract violation(s), first: %s", ppath, len(vs), vs[0])
		}
		files, _, _, err := b.exportGraphs(qm, p, filepath.Join(dir, ONNXDir), StepDraft)
		if err != nil {
			return err
		}
		s.Outputs = []string{b.rel(dir) + "/"}
		s.Note = fmt.Sprintf("%d layers in %d stages, %d graphs", qm.Config.Layers, len(p.Stages), len(p.Graphs))
		return b.compileDraft(s, dir, &qnnpack.DraftModel{Plan: p, Config: qm.Config}, files, b.o.SkipCheck, b.o.AllowRecurrentState)
	})
}

// compileDraft compiles the draft engine's graphs in dir with the SDK into
// dm's context binaries, or in a dry run lists the commands and names the
// binaries they would make; dm becomes the bundle's draft.
func (b *builder) compileDraft(s *StepResult, dir string, dm *qnnpack.DraftModel, files map[string]qnnpack.GraphFiles, skipCheck, allowRecurrentState bool) error {
	if b.dryRun() {
		jobs, stages, err := dryRunJobs(dm.Plan, files, filepath.Join(dir, SDKDir))
		if err != nil {
			return err
		}
		b.draftJobs, b.draftStages = jobs, stages
		for _, st := range stages {
			dm.ContextBinaries = append(dm.ContextBinaries, st.Binary)
		}
		b.draft = dm
		s.Status = StatusDryRun
		s.Note += fmt.Sprintf("; %d SDK commands not run", len(jobs))
		return nil
	}
	res, err := qnnpack.Build(b.ctx, qnnpack.BuildOptions{
		SDK: b.o.SDK, Plan: dm.Plan, Config: dm.Config, Graphs: files,
		OutDir: filepath.Join(dir, BundleDir), WorkDir: filepath.Join(dir, SDKDir), SoC: b.o.SoC,
		ConverterArgs: b.o.ConverterArgs, QnnprepVersion: b.o.QnnprepVersion, SkipCheck: skipCheck,
		AllowRecurrentState: allowRecurrentState,
		Parallel:            b.o.Parallel, Timeout: b.o.Timeout, Force: b.o.Force, Log: b.o.Log,
	})
	if err != nil {
		return err
	}
	for _, st := range res.Stages {
		dm.ContextBinaries = append(dm.ContextBinaries, st.Binary)
	}
	b.draft = dm
	return nil
}

func (b *builder) dryRun() bool { return b.o.DryRun || b.o.SDK == nil }

func (b *builder) writeSummary() error {
	if _, err := os.Stat(b.o.OutDir); err != nil {
		return nil
	}
	data, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(b.o.OutDir, SummaryName), append(data, '\n'))
}

// specialTokens adds the source's BOS and EOS ids to md when it has no
// tokenizer keys for them: an HF checkpoint without tokenizer.json still
// names them in config.json, and Genie's config needs both.
func specialTokens(md gguf.Metadata, cfg model.Config) gguf.Metadata {
	out := append(gguf.Metadata(nil), md...)
	for _, t := range []struct {
		key string
		id  int
	}{{"tokenizer.ggml.bos_token_id", cfg.BOS}, {"tokenizer.ggml.eos_token_id", cfg.EOS}} {
		if _, ok := out.Get(t.key); !ok && t.id >= 0 {
			out.Set(t.key, uint32(t.id))
		}
	}
	return out
}
