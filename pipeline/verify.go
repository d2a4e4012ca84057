package pipeline

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

// verify records the golden from the source and decodes the qmodel whole,
// through the plan (staged executor) and, for spd, speculatively.
func (b *builder) verify() error {
	if b.o.NoVerify {
		s := b.res.Step(StepVerify)
		s.Status, s.Note = StatusSkipped, "not verified (--no-verify)"
		return nil
	}
	return b.step(StepVerify, func(s *StepResult) error {
		prompts := b.o.Prompts
		if len(prompts) == 0 {
			prompts = DefaultPrompts(b.qm.Config)
		}
		n, topK := b.o.Tokens, b.o.TopK
		if n <= 0 {
			n = 16
		}
		if topK <= 0 {
			topK = 8
		}
		longest := 0
		for _, p := range prompts {
			longest = max(longest, len(p.IDs))
		}
		ctxLen := longest + n + 1
		if c := b.qm.Config.ContextLength; c > 0 && ctxLen > c {
			return fmt.Errorf("prompts of %d tokens and %d steps exceed the context length %d", longest, n, c)
		}
		ropts := runtime.Options{Threads: b.o.Threads, Context: ctxLen}
		srcEngine, err := runtime.New(b.src, ropts)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		f, err := golden.Record(b.ctx, srcEngine, prompts, n, topK)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		sha, err := quantize.SourceFingerprint(b.src)
		if err != nil {
			return err
		}
		f.Model = golden.ModelRef{Path: b.o.Source, Arch: string(b.src.Config.Arch), SHA256: sha}
		gpath := filepath.Join(b.work, GoldenName)
		if err := golden.Write(gpath, f); err != nil {
			return err
		}
		qEngine, err := runtime.New(b.qm, ropts)
		if err != nil {
			return fmt.Errorf("qmodel: %w", err)
		}
		// The same guard and defaults as qnnprep verify: the qmodel must
		// come from the source, and is held to its recipe's thresholds.
		acc, err := f.Accept(b.qm, "")
		if err != nil {
			return fmt.Errorf("qmodel: %w", err)
		}
		crit := f.DefaultCriteria(b.qm, acc).With(b.o.Thresholds)
		v := &Verification{Prompts: len(prompts), Tokens: n}
		b.res.Verify = v
		if v.Whole, err = golden.Verify(b.ctx, golden.EngineDecoder(qEngine), f, crit); err != nil {
			return fmt.Errorf("qmodel whole: %w", err)
		}
		v.Whole.Decoder, v.Whole.Source = "whole", acc
		s.Outputs = []string{b.rel(gpath)}
		sum := v.Whole.Summary
		quality := fmt.Sprintf("vs source: top-1 %.1f%%, exact %d/%d tokens", 100*sum.Top1, sum.Matched, sum.Tokens)
		if b.draftQM != nil {
			dEngine, err := runtime.New(b.draftQM, ropts)
			if err != nil {
				return fmt.Errorf("draft: %w", err)
			}
			sd := golden.SpeculativeDecoder(qEngine, func() (runtime.Drafter, error) { return runtime.NewDraftModel(qEngine, dEngine) }, b.res.Plan.Dialog.DraftLen)
			if v.Speculative, err = golden.Verify(b.ctx, sd, f, golden.Criteria{}); err != nil {
				return fmt.Errorf("speculative decode: %w", err)
			}
			spec := v.compareSpeculative("speculative")
			if sr := v.Speculative.Speculative; sr != nil {
				spec += fmt.Sprintf(" (acceptance %.2f of %d)", sr.AcceptanceLength, sr.K)
			}
			quality = spec + "; " + quality
		}
		if b.o.WholeOnly {
			v.Note = "whole only: the qmodel was not decoded through the plan"
			s.Status = StatusPartial
			s.Note = v.Note + "; " + quality
			return nil
		}
		// The staged executor keeps each variant's cache surfaces, so its
		// engine's context must hold the plan's largest CL.
		sopts := ropts
		for _, v := range b.res.Plan.Variants {
			sopts.Context = max(sopts.Context, v.CL)
		}
		sEngine, err := runtime.New(b.qm, sopts)
		if err != nil {
			return fmt.Errorf("qmodel: %w", err)
		}
		staged := b.o.Staged
		switch {
		case staged == nil && b.head != nil:
			staged = func(e *runtime.Engine, p *shard.Plan) (golden.Decoder, error) {
				st, _, err := b.eagletStaged(e, p)
				return st, err
			}
		case staged == nil:
			staged = runtimeStaged
		}
		d, err := staged(sEngine, b.res.Plan)
		if err != nil {
			return fmt.Errorf("staged executor: %w", err)
		}
		if v.Staged, err = golden.Verify(b.ctx, d, f, golden.Criteria{}); err != nil {
			return fmt.Errorf("qmodel through the plan: %w", err)
		}
		v.Staged.Decoder = "plan " + b.rel(b.res.PlanPath)
		same := sameOutputs(v.Whole, v.Staged)
		v.StagedEqualsWhole = &same
		if same {
			s.Note = fmt.Sprintf("staged == whole on %d prompts × %d tokens; %s", len(prompts), n, quality)
		} else {
			s.Note = fmt.Sprintf("staged decode DIFFERS from whole; %s", quality)
		}
		if b.forecast != nil {
			note, err := b.verifySSD(v, sEngine, d, f)
			if err != nil {
				return err
			}
			s.Note += "; " + note
		}
		if b.head != nil {
			note, err := b.verifyEaglet(v, sEngine, d, f)
			if err != nil {
				return err
			}
			s.Note += "; " + note
		}
		if !v.Whole.Pass {
			s.Note += "; criteria failed: " + strings.Join(v.Whole.Failures, "; ")
		}
		return nil
	})
}

// verifySSD decodes the golden's prompts with the ssd-q1 dialog through
// the plan (runtime.Staged.SpeculateSSD), the forecast rows as the first
// stage holds them and a zero forecast prefix (the placeholder's; a given
// prefix file is quantized on the device's KV encodings and not decoded
// here, which changes only what is drafted). Its tokens must be the whole
// model's.
func (b *builder) verifySSD(v *Verification, e *runtime.Engine, tf golden.Decoder, f *golden.File) (string, error) {
	st, err := runtime.NewStaged(e, b.res.Plan)
	if err != nil {
		return "", fmt.Errorf("ssd-q1: %w", err)
	}
	sp := runtime.SSDSpeculator{Staged: st, Options: runtime.SSDOptions{Forecast: b.forecast}}
	d := &b.res.Plan.Dialog
	sd := golden.SpeculativeThrough(sp, tf, func() (runtime.Drafter, error) { return nil, nil }, d.Nodes-1)
	note, err := b.verifyThroughPlan(v, sd, f, "ssd-q1")
	if err != nil {
		return "", err
	}
	if sr := v.Speculative.Speculative; sr != nil {
		note += fmt.Sprintf(" (%.2f drafts accepted per call of %d draft nodes, %.2f target calls per token)", sr.AcceptanceLength, sr.K, sr.TargetCallsPerToken)
	}
	return note, nil
}

// verifyThroughPlan verifies the golden's prompts decoded by sd, the
// plan's dialog name, and returns the note of compareSpeculative.
func (b *builder) verifyThroughPlan(v *Verification, sd *golden.SpecDecoder, f *golden.File, name string) (string, error) {
	var err error
	if v.Speculative, err = golden.Verify(b.ctx, sd, f, golden.Criteria{}); err != nil {
		return "", fmt.Errorf("%s decode through the plan: %w", name, err)
	}
	v.Speculative.Decoder = name + " through plan " + b.rel(b.res.PlanPath)
	return v.compareSpeculative(name), nil
}

// compareSpeculative records whether the speculative decode gave the
// whole model's tokens and says so in a note naming the decoder.
func (v *Verification) compareSpeculative(name string) string {
	same := sameOutputs(v.Whole, v.Speculative)
	v.SpeculativeEqualsWhole = &same
	if !same {
		return name + " decode DIFFERS from whole"
	}
	return name + " == whole"
}

// sameOutputs reports whether two reports over one golden file decoded
// the same tokens for every prompt.
func sameOutputs(a, b *golden.Report) bool {
	if len(a.Prompts) != len(b.Prompts) {
		return false
	}
	for i := range a.Prompts {
		if !equalIDs(a.Prompts[i].Got, b.Prompts[i].Got) {
			return false
		}
	}
	return true
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// runtimeStaged is the runtime's staged executor as a StagedFunc.
func runtimeStaged(e *runtime.Engine, p *shard.Plan) (golden.Decoder, error) {
	return runtime.NewStaged(e, p)
}
