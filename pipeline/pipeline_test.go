package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// synthLlama writes a synthetic 1-bit-native llama GGUF (2 layers, Q1_0
// matrices, a Q2_0 head: q1 builds of it meet q1's default thresholds) and
// returns its path and config.
func synthLlama(t *testing.T) (string, model.Config) {
	t.Helper()
	cfg := synth.Config(model.Llama, true)
	path := filepath.Join(t.TempDir(), "llama.gguf")
	if err := synth.WriteGGUFOneBit(path, cfg, 7); err != nil {
		t.Fatal(err)
	}
	return path, cfg
}

func options(t *testing.T, src, out, recipe string) Options {
	t.Helper()
	r, err := quantize.LookupRecipe(recipe)
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Source: src, OutDir: out, Recipe: r, SoC: "8elite", DryRun: true,
		Plan: shard.Options{Stages: 2, AR: []int{32, 1}, CL: []int{256}}, Tokens: 8,
	}
}

// TestDryRun: every file the SDK does not produce is written, the
// commands name every graph and stage, the steps report what they did,
// and a second run gives byte-identical artifacts.
func TestDryRun(t *testing.T) {
	src, cfg := synthLlama(t)
	out := filepath.Join(t.TempDir(), "out")
	var cmds bytes.Buffer
	o := options(t, src, out, "q1")
	o.Commands, o.WholeOnly = &cmds, true
	res, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		StepQuantize: StatusOK, StepPlan: StatusOK, StepCheck: StatusOK, StepExport: StatusOK, StepSimulate: StatusOK,
		StepSDK: StatusDryRun, StepBundle: StatusOK, StepVerify: StatusPartial,
	}
	for _, s := range res.Steps {
		if s.Status != want[s.Name] {
			t.Errorf("step %s: status %q, want %q (%s)", s.Name, s.Status, want[s.Name], s.Note)
		}
	}
	p := res.Plan
	if len(p.Stages) != 2 || len(p.Graphs) != 4 {
		t.Fatalf("plan: %d stages, %d graphs", len(p.Stages), len(p.Graphs))
	}
	files := []string{"work/qmodel.gguf", "work/plan.json", "work/golden.json", "work/sdk_commands.sh", "summary.json",
		"bundle/genie_config.json", "bundle/htp_backend_ext_config.json", "bundle/plan.json", "bundle/manifest.json", "bundle/tokenizer.json"}
	for _, g := range p.Graphs {
		files = append(files, "work/onnx/"+g.Name+".onnx", "work/onnx/"+g.Name+".encodings.json")
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// One converter run per graph, one context binary per stage.
	text := cmds.String()
	if n := strings.Count(text, qnnpack.ToolConverter); n != len(p.Graphs) {
		t.Errorf("%d converter commands, want %d:\n%s", n, len(p.Graphs), text)
	}
	if n := strings.Count(text, qnnpack.ToolCtxGen); n != len(p.Stages) {
		t.Errorf("%d context-binary commands, want %d", n, len(p.Stages))
	}
	for _, g := range p.Graphs {
		if !strings.Contains(text, g.Name+".onnx") {
			t.Errorf("commands do not convert %s", g.Name)
		}
	}
	// The qmodel is the quantizer's output: Q1_0 matrices, the source's
	// BOS/EOS (the genie config needs them).
	qm, err := model.Open(res.QModel)
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Close()
	if typ := qm.Tensor("blk.0.attn_q.weight").Type; typ != gguf.Q1_0 {
		t.Errorf("attn_q type %v", typ)
	}
	if qm.Config.BOS != cfg.BOS || qm.Config.EOS != cfg.EOS {
		t.Errorf("qmodel BOS/EOS %d/%d, source %d/%d", qm.Config.BOS, qm.Config.EOS, cfg.BOS, cfg.EOS)
	}
	if st, _ := os.Stat(res.QModel); st.Size() != res.Bytes {
		t.Errorf("result bytes %d, file %d", res.Bytes, st.Size())
	}
	v := res.Verify
	if v == nil || v.Whole == nil || v.Staged != nil || v.StagedEqualsWhole != nil || v.Whole.Summary.Tokens != 3*8 {
		t.Fatalf("verify %+v", v)
	}
	if !res.Pass() {
		t.Error("dry run without a staged executor should pass")
	}

	// Same inputs, same bytes.
	out2 := filepath.Join(t.TempDir(), "out")
	o.OutDir, o.Commands = out2, nil
	if _, err := Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == "summary.json" || f == "work/sdk_commands.sh" || strings.HasPrefix(f, "bundle/") {
			continue // hold OutDir's path or timings
		}
		a, _ := os.ReadFile(filepath.Join(out, f))
		b, _ := os.ReadFile(filepath.Join(out2, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs", f)
		}
	}
}

// perturbed is a staged decoder that changes one token of every greedy
// continuation after the first prompt: a wrong surface.
type perturbed struct {
	golden.Decoder
	calls int
}

func (p *perturbed) Greedy(ctx context.Context, prompt []int32, n int) ([]int32, error) {
	ids, err := p.Decoder.Greedy(ctx, prompt, n)
	p.calls++
	if err == nil && p.calls > 1 && len(ids) > 2 {
		ids[2] = (ids[2] + 1) % 512
	}
	return ids, err
}

// TestStagedComparison: a staged decoder equal to the whole model passes;
// one whose tokens differ is reported and fails the build.
func TestStagedComparison(t *testing.T) {
	src, _ := synthLlama(t)
	for _, tc := range []struct {
		name string
		f    StagedFunc
		same bool
	}{
		{"equal", func(e *runtime.Engine, p *shard.Plan) (golden.Decoder, error) { return golden.EngineDecoder(e), nil }, true},
		{"differs", func(e *runtime.Engine, p *shard.Plan) (golden.Decoder, error) {
			return &perturbed{Decoder: golden.EngineDecoder(e)}, nil
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, src, filepath.Join(t.TempDir(), "out"), "int8")
			o.Staged = tc.f
			res, err := Build(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			v := res.Verify
			if v.StagedEqualsWhole == nil || *v.StagedEqualsWhole != tc.same || res.Pass() != tc.same {
				t.Errorf("staged==whole %v, pass %v, want %v", v.StagedEqualsWhole, res.Pass(), tc.same)
			}
			if s := res.Step(StepVerify); s.Status != StatusOK {
				t.Errorf("verify status %q", s.Status)
			}
		})
	}
}

// TestKeepsTheUsersFiles: an output directory, or its bundle directory,
// holding a file the build did not write is refused before any step, and
// nothing in it changes (not even a summary.json appears).
func TestKeepsTheUsersFiles(t *testing.T) {
	src, _ := synthLlama(t)
	for _, sub := range []string{"", BundleDir} {
		t.Run("in "+sub+"/", func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			if sub != "" {
				if err := atomicfile.Claim(out, WorkDir, BundleDir, SummaryName); err != nil {
					t.Fatal(err)
				}
			}
			notes := filepath.Join(out, sub, "notes.txt")
			os.MkdirAll(filepath.Dir(notes), 0o755)
			os.WriteFile(notes, []byte("mine"), 0o644)
			before := listTree(t, out)
			_, err := Build(context.Background(), options(t, src, out, "q1"))
			if !errors.Is(err, atomicfile.ErrNotOwned) || !strings.Contains(err.Error(), notes) {
				t.Fatalf("error %v, want one naming %s", err, notes)
			}
			if after := listTree(t, out); after != before {
				t.Fatalf("the directory changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// listTree returns every path under dir with its contents.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(p)
		fmt.Fprintf(&b, "%s %q\n", p, data)
		return nil
	})
	return b.String()
}

// TestStepErrors: a failing step is named in the error and the summary,
// later steps are not run.
func TestStepErrors(t *testing.T) {
	src, _ := synthLlama(t)
	for _, tc := range []struct {
		step string
		edit func(o *Options)
	}{
		{StepQuantize, func(o *Options) { o.Source = filepath.Join(t.TempDir(), "missing.gguf") }},
		{StepPlan, func(o *Options) { o.Plan.Stages = 5 }}, // 2 layers
		{StepCheck, func(o *Options) { o.Plan.VTCMMB = 4 }},
		{StepExport, func(o *Options) { // a file where the ONNX directory goes, left by an earlier run
			atomicfile.Claim(o.OutDir, WorkDir)
			os.MkdirAll(filepath.Join(o.OutDir, WorkDir), 0o755)
			os.WriteFile(filepath.Join(o.OutDir, WorkDir, ONNXDir), nil, 0o644)
		}},
		{StepSimulate, func(o *Options) { o.Tokens = 1000 }},                    // past the plan's CL
		{StepVerify, func(o *Options) { o.Tokens = 1000; o.NoSimulate = true }}, // past the context length
	} {
		t.Run(tc.step, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			o := options(t, src, out, "q1")
			tc.edit(&o)
			res, err := Build(context.Background(), o)
			var se *StepError
			if !errors.As(err, &se) || se.Step != tc.step || !strings.HasPrefix(err.Error(), tc.step+": ") {
				t.Fatalf("error %v, want one from step %s", err, tc.step)
			}
			seen := false
			for _, s := range res.Steps {
				switch {
				case s.Name == tc.step:
					seen = true
					if s.Status != StatusFailed {
						t.Errorf("%s: status %q", s.Name, s.Status)
					}
				case seen && s.Status != StatusNotRun:
					t.Errorf("%s ran after %s failed", s.Name, tc.step)
				}
			}
			if tc.step != StepVerify {
				if _, err := os.Stat(filepath.Join(out, BundleDir)); !os.IsNotExist(err) {
					t.Errorf("bundle written although %s failed", tc.step)
				}
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	src, _ := synthLlama(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(t.TempDir(), "out")
	_, err := Build(ctx, options(t, src, out, "q1"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(out, WorkDir, QModelName)); !os.IsNotExist(err) {
		t.Error("cancelled build left a qmodel")
	}
}

// synthDraft writes a one-layer synthetic llama with the target's
// vocabulary, as an spd draft.
func synthDraft(t *testing.T) string {
	t.Helper()
	cfg := synth.Config(model.Llama, true)
	cfg.Layers, cfg.LayerKinds = 1, cfg.LayerKinds[:1]
	path := filepath.Join(t.TempDir(), "draft.gguf")
	if err := synth.WriteGGUF(path, cfg, 11, gguf.F32); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSPDDryRun: the draft's vocabulary is checked before anything is
// built; the draft is quantized, planned and exported; the SDK commands of
// both models are printed (draft first); the bundle holds both engines'
// Genie config (the draft's context binaries named in draft/, as the
// target's are named) and the draft's plan; the speculative CPU decode
// gives the whole model's tokens.
func TestSPDDryRun(t *testing.T) {
	src, _ := synthLlama(t)
	out := filepath.Join(t.TempDir(), "out")
	o := options(t, src, out, "int8")
	o.Plan.Dialog = shard.Dialog{Type: shard.SPD, DraftLen: 3}
	if _, err := Build(context.Background(), o); err == nil || !strings.HasPrefix(err.Error(), "plan: dialog spd needs a draft") {
		t.Fatalf("spd without a draft: %v", err)
	}
	// Another vocabulary: refused at the first step, nothing written.
	other := synth.Config(model.Llama, true)
	other.Layers, other.LayerKinds, other.VocabSize = 1, other.LayerKinds[:1], 300
	bad := filepath.Join(t.TempDir(), "other.gguf")
	if err := synth.WriteGGUF(bad, other, 11, gguf.F32); err != nil {
		t.Fatal(err)
	}
	o.Draft = &Draft{Source: bad}
	res, err := Build(context.Background(), o)
	if err == nil || !strings.HasPrefix(err.Error(), "quantize: draft "+bad+": vocabulary of 300 tokens, the target") {
		t.Fatalf("draft of another vocabulary: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, WorkDir, QModelName)); err == nil || res.Step(StepPlan).Status != StatusNotRun {
		t.Error("the build went on after the draft's vocabulary check")
	}

	o.Draft = &Draft{Source: synthDraft(t)}
	var cmds bytes.Buffer
	o.Commands = &cmds
	res, err = Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Step(StepDraft); s == nil || s.Status != StatusDryRun {
		t.Fatalf("draft step %+v", s)
	}
	if s := res.Step(StepBundle); s.Status != StatusOK {
		t.Errorf("bundle step %+v", s)
	}
	text := cmds.String()
	first := strings.Index(text, "_draft_ar")
	if first < 0 || strings.Count(text, qnnpack.ToolConverter) != len(res.Plan.Graphs)+len(res.Plan.Variants) || first > strings.Index(text, "llama_ar") {
		t.Errorf("commands:\n%s", text)
	}
	for _, f := range []string{"work/draft/qmodel.gguf", "work/draft/plan.json", "bundle/" + qnnpack.BundleDraftPlanName} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := qnnpack.VerifyBundleFiles(res.Bundle); err != nil {
		t.Fatal(err)
	}
	dp, err := shard.ReadPlan(filepath.Join(res.Bundle, qnnpack.BundleDraftPlanName))
	if err != nil {
		t.Fatal(err)
	}
	genie, err := os.ReadFile(filepath.Join(res.Bundle, qnnpack.GenieConfigName))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type": "spd"`, `"role": "draft"`, `"role": "target"`, `"draft/` + qnnpack.ContextBinaryName(dp, 0) + `.bin"`} {
		if !strings.Contains(string(genie), want) {
			t.Errorf("genie_config.json lacks %s:\n%s", want, genie)
		}
	}
	v := res.Verify
	if v.Speculative == nil || v.SpeculativeEqualsWhole == nil || !*v.SpeculativeEqualsWhole || v.Speculative.Speculative == nil {
		t.Fatalf("speculative verify %+v", v)
	}
	if !res.Pass() {
		t.Error("spd dry run did not pass")
	}
}
