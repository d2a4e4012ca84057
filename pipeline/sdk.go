package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/scaleout"
	"github.com/qnnprep/qnnprep/shard"
)

// sdkAndBundle runs qnnpack.Build: the SDK step is its tool runs (or the
// printed commands), the bundle step its bundle, re-checked by VerifyBundle.
func (b *builder) sdkAndBundle() error {
	if b.o.Shard != nil {
		return b.sdkShard()
	}
	dry := b.dryRun()
	var cmds bytes.Buffer
	var res *qnnpack.Result
	recipe, _ := json.Marshal(map[string]any{"name": b.o.Recipe.Name, "description": b.o.Recipe.Description, "source_sha256": b.res.Quant.SourceSHA256})
	var lut *qnnpack.EagletLUT
	if b.head != nil {
		var err error
		if lut, err = b.eagletLUT(); err != nil {
			return &StepError{StepSDK, err}
		}
	}
	err := b.step(StepSDK, func(s *StepResult) error {
		log := b.o.Log
		var jobs []qnnpack.Job // dry run: the draft's, then the target's
		var stages []qnnpack.StagePaths
		if dry {
			log = &cmds
			target, ts, err := dryRunJobs(b.res.Plan, b.files, filepath.Join(b.work, SDKDir))
			if err != nil {
				return err
			}
			jobs = append(append(jobs, b.draftJobs...), target...)
			stages = append(append(stages, b.draftStages...), ts...)
			for i := range b.draftJobs {
				fmt.Fprintln(&cmds, b.draftJobs[i].Command())
			}
		}
		var err error
		res, err = qnnpack.Build(b.ctx, qnnpack.BuildOptions{
			SDK: b.o.SDK, Plan: b.res.Plan, Config: b.qm.Config, Graphs: b.files,
			OutDir: filepath.Join(b.o.OutDir, BundleDir), WorkDir: filepath.Join(b.work, SDKDir), SoC: b.o.SoC,
			ConverterArgs: b.o.ConverterArgs, Tokenizer: b.tok.Copy, TokenizerJSON: b.tok.JSON, EOG: b.tok.EOG, Recipe: recipe,
			QnnprepVersion: b.o.QnnprepVersion, SkipCheck: b.o.SkipCheck, Draft: b.draft,
			ForecastPrefix: b.o.ForecastPrefix, ForecastEmbeddings: b.forecast, EagletLUT: lut,
			AllowRecurrentState: b.o.AllowRecurrentState,
			Incomplete:          incompleteVerify,
			DryRun:              dry, Parallel: b.o.Parallel, Timeout: b.o.Timeout, Force: b.o.Force, Log: log, Cache: b.o.Cache,
		})
		if err != nil {
			return err
		}
		if dry {
			text := cmds.String()
			b.res.Commands = strings.Split(strings.TrimRight(text, "\n"), "\n")
			script := filepath.Join(b.work, CommandsName)
			if err := atomicfile.WriteFile(script, []byte(sdkScript(jobs, stages))); err != nil {
				return err
			}
			if b.o.Commands != nil {
				io.WriteString(b.o.Commands, text)
			}
			s.Status = StatusDryRun
			s.Outputs = []string{b.rel(script)}
			why := "--dry-run"
			if b.o.SDK == nil {
				why = "no SDK"
			}
			s.Note = fmt.Sprintf("%s: %d commands not run", why, len(b.res.Commands))
			return nil
		}
		ran, cached := 0, 0
		for _, r := range res.Runs {
			if r.Cached {
				cached++
			} else {
				ran++
			}
		}
		s.Outputs = []string{b.rel(filepath.Join(b.work, SDKDir)) + "/"}
		s.Note = fmt.Sprintf("SDK %s: %d jobs run, %d up to date", b.o.SDK.Version, ran, cached)
		return nil
	})
	if err != nil {
		return err
	}
	// qnnpack.Build wrote the bundle as its last act (its time is in the
	// sdk step), marked incomplete until the build passes; the bundle step
	// re-checks everything else.
	return b.step(StepBundle, func(s *StepResult) error {
		m, err := qnnpack.VerifyBundleFiles(res.Bundle)
		if err != nil {
			return err
		}
		b.res.Bundle = res.Bundle
		s.Outputs = []string{b.rel(res.Bundle) + "/"}
		s.Note = fmt.Sprintf("%d files, manifest verified", len(m.Files))
		if m.DryRun {
			s.Note += "; no context binaries (dry run)"
		}
		return nil
	})
}

// sdkShard is the SDK step of one shard: its stages go into the work
// directory and the cache; the bundle step is skipped, for 'qnnprep
// bundle assemble' to do once every shard has run.
func (b *builder) sdkShard() error {
	sh := *b.o.Shard
	err := b.step(StepSDK, func(s *StepResult) error {
		switch {
		case b.dryRun():
			return fmt.Errorf("shard %s: a shard runs the SDK; without one (or with --dry-run) it has nothing to build", sh)
		case b.o.Draft != nil:
			return fmt.Errorf("shard %s: an spd build's draft model is not split into shards; build it in one process", sh)
		}
		work := filepath.Join(b.work, SDKDir)
		res, stages, err := scaleout.BuildShard(b.ctx, qnnpack.BuildOptions{
			SDK: b.o.SDK, Plan: b.res.Plan, Config: b.qm.Config, Graphs: b.files, WorkDir: work, SoC: b.o.SoC,
			ConverterArgs: b.o.ConverterArgs, SkipCheck: b.o.SkipCheck, AllowRecurrentState: b.o.AllowRecurrentState,
			Parallel: b.o.Parallel, Timeout: b.o.Timeout, Force: b.o.Force, Log: b.o.Log, Cache: b.o.Cache,
		}, sh)
		if err != nil {
			return err
		}
		c := qnnpack.CountJobs(res.Runs)
		names := make([]string, len(stages))
		for i, st := range stages {
			names[i] = fmt.Sprint(st + 1)
		}
		s.Outputs = []string{b.rel(work) + "/"}
		s.Note = fmt.Sprintf("shard %s, stages %s of %d: %d jobs run, %d up to date, %d from the cache", sh, strings.Join(names, ","), len(b.res.Plan.Stages), c.Ran, c.UpToDate, c.Fetched)
		return nil
	})
	if err != nil {
		return err
	}
	s := b.res.Step(StepBundle)
	s.Status = StatusSkipped
	s.Note = fmt.Sprintf("shard %s writes no bundle: once every shard has run, 'qnnprep bundle assemble --plan %s --model %s --graphs %s --cache ... --shard-count %d' writes it",
		sh, filepath.Join(b.work, PlanName), filepath.Join(b.work, QModelName), filepath.Join(b.work, ONNXDir), sh.Count)
	return nil
}

// incompleteVerify is the mark a build's bundle carries until the build
// has passed (finishBundle).
const incompleteVerify = "written by qnnprep build before its verify step; it is complete only once the build passes"

// finishBundle completes the bundle when the build passed, and otherwise
// leaves it marked incomplete with the reason, so that only a passing
// build leaves a bundle 'bundle verify' accepts.
func (b *builder) finishBundle(err error) error {
	dir := filepath.Join(b.o.OutDir, BundleDir)
	switch {
	case err == nil && b.res.Pass():
		if b.res.Bundle == "" {
			return nil // no bundle: the build stopped before it
		}
		return qnnpack.MarkComplete(dir)
	case err != nil:
		return qnnpack.MarkIncomplete(dir, "qnnprep build failed: "+err.Error())
	default:
		return qnnpack.MarkIncomplete(dir, "qnnprep build ended with result FAIL")
	}
}

// dryRunJobs lists the SDK jobs for p's graphs, as a dry-run qnnpack.Build
// plans them (paths under ${QNN_SDK_ROOT}).
func dryRunJobs(p *shard.Plan, files map[string]qnnpack.GraphFiles, work string) ([]qnnpack.Job, []qnnpack.StagePaths, error) {
	return qnnpack.PlanJobs(qnnpack.DryRunSDK(), p, files, work)
}

// sdkScript is a shell script that runs jobs in order the way qnnpack's
// runner does: each tool writes into its temporary directory, whose
// outputs are then moved to their final paths.
//
// A dry run's compile configs name the HTP extensions library under a
// literal ${QNN_SDK_ROOT}, which no tool expands inside JSON; the script
// substitutes the variable in them first.
func sdkScript(jobs []qnnpack.Job, stages []qnnpack.StagePaths) string {
	var sb strings.Builder
	sb.WriteString("#!/bin/sh\n# The QAIRT SDK commands qnnprep build would run, in order.\nset -e\n")
	sb.WriteString(": \"${QNN_SDK_ROOT:?set QNN_SDK_ROOT to the QAIRT SDK root}\"\n")
	for _, st := range stages {
		fmt.Fprintf(&sb, "sed -i 's|\\${QNN_SDK_ROOT}|'\"$QNN_SDK_ROOT\"'|g' %s\n", quote(st.CtxConfig))
	}
	for i := range jobs {
		j := &jobs[i]
		fmt.Fprintf(&sb, "\n# %s\nmkdir -p %s\n%s\n", j.Name(), quote(j.TempDir), j.Command())
		for _, o := range j.Outputs {
			fmt.Fprintf(&sb, "mv %s %s\n", quote(filepath.Join(j.TempDir, filepath.Base(o))), quote(o))
		}
		fmt.Fprintf(&sb, "rmdir %s\n", quote(j.TempDir))
	}
	return sb.String()
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
