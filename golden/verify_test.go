package golden

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/testkit/quantized"
)

var ctx = context.Background()

func record(t *testing.T, m *model.Model, ps []Prompt, n, k int) *File {
	t.Helper()
	f, err := Record(ctx, engine(t, m), ps, n, k)
	if err != nil {
		t.Fatal(err)
	}
	sha, err := quantize.SourceFingerprint(m)
	if err != nil {
		t.Fatal(err)
	}
	f.Model = ModelRef{Path: "src", Arch: string(m.Config.Arch), SHA256: sha}
	// Through the file format, as the command does.
	path := filepath.Join(t.TempDir(), "golden.json")
	if err := Write(path, f); err != nil {
		t.Fatal(err)
	}
	g, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func verify(t *testing.T, m *model.Model, f *File, c Criteria) *Report {
	t.Helper()
	if _, err := f.Accept(m, ""); err != nil {
		t.Fatal(err)
	}
	r, err := Verify(ctx, EngineDecoder(engine(t, m)), f, c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var strict = Criteria{MinMatch: 1, MinTop1: 1, MinCosine: 0.9999, FailOnDegeneration: true}

// TestVerifySelf: a model verified against its own golden passes every
// criterion, with cosine 1; the recorded continuation is greedy decoding's
// and the recorded top-k are the logits' largest, re-derived here.
func TestVerifySelf(t *testing.T) {
	for _, arch := range []model.Arch{model.Llama, model.Qwen2, model.Qwen3} {
		t.Run(string(arch), func(t *testing.T) {
			m := randomModel(t, tinyConfig(arch, 96), 3)
			f := record(t, m, prompts(4, 128, 5), 32, 8)
			e := engine(t, m)
			for _, p := range f.Prompts {
				want, _ := e.Greedy(ctx, p.IDs, 32)
				if err := sameIDs(p.Expected, want); err != nil {
					t.Fatalf("%s: recorded continuation: %v", p.Name, err)
				}
				rows, _ := e.Logits(ctx, append(append([]int32(nil), p.IDs...), p.Expected...))
				for s, top := range p.TopK {
					row := rows[len(p.IDs)-1+s]
					if len(top) != 8 || top[0].ID != p.Expected[s] || top[0].Logit != row[top[0].ID] {
						t.Fatalf("%s step %d: top-k %v", p.Name, s, top)
					}
					for i := 1; i < len(top); i++ {
						if top[i].Logit > top[i-1].Logit || top[i].Logit != row[top[i].ID] {
							t.Fatalf("%s step %d: top-k %v not descending logits of the row", p.Name, s, top)
						}
					}
				}
			}
			r := verify(t, m, f, strict)
			if !r.Pass || r.Summary.ExactPrompts != 4 || r.Summary.Top1 != 1 || *r.Summary.Cosine < 0.99999 {
				t.Fatalf("self verification: %+v", r)
			}
		})
	}
}

// TestVerifyQ1: a Q1_0 qmodel verified against the golden of its F32
// source: the reported first divergence is the first step at which the
// qmodel, fed the golden tokens one at a time, prefers another token, and
// the reported tokens and top-5 are the ones at that step.
func TestVerifyQ1(t *testing.T) {
	src := randomModel(t, tinyConfig(model.Llama, 128), 11)
	f := record(t, src, prompts(6, 128, 12), 48, 10)
	q := quantized.Model(t, src, "q1")
	r := verify(t, q, f, Criteria{})
	if !r.Pass {
		t.Fatalf("no criteria, but failed: %v", r.Failures)
	}
	qe := engine(t, q)
	diverged := 0
	for i, p := range f.Prompts {
		pr := r.Prompts[i]
		// Independent: step by step on one State.
		st := qe.NewState()
		logits, err := st.Forward(p.IDs)
		if err != nil {
			t.Fatal(err)
		}
		step := -1
		var at []float32
		for s, want := range p.Expected {
			if runtime.Argmax(logits) != want {
				step, at = s, logits
				break
			}
			if logits, err = st.Forward([]int32{want}); err != nil {
				t.Fatal(err)
			}
		}
		if step < 0 {
			if pr.Divergence != nil || pr.Match != len(p.Expected) {
				t.Fatalf("%s: no divergence, report says %+v", p.Name, pr.Divergence)
			}
			continue
		}
		diverged++
		d := pr.Divergence
		if d == nil || d.Step != step || pr.Match != step || d.Expected != p.Expected[step] || d.Got != runtime.Argmax(at) || d.Got != pr.Got[step] {
			t.Fatalf("%s: divergence %+v, match %d; want step %d, expected %d, got %d", p.Name, d, pr.Match, step, p.Expected[step], runtime.Argmax(at))
		}
		if len(d.GotTop) != 5 || d.GotTop[0].ID != d.Got || d.GotTop[0].Logit != at[d.Got] {
			t.Fatalf("%s: got top-5 %v", p.Name, d.GotTop)
		}
		if len(d.ExpectedTop) != 5 || d.ExpectedTop[0] != p.TopK[step][0] || d.ExpectedTop[0].ID != p.Expected[step] {
			t.Fatalf("%s: expected top-5 %v", p.Name, d.ExpectedTop)
		}
	}
	if diverged == 0 {
		t.Fatalf("the Q1_0 model never diverged from F32: the test proves nothing")
	}
	cos := *r.Summary.Cosine
	if cos <= 0.5 || cos >= 1 || r.Summary.Top1 >= 1 {
		t.Fatalf("summary %+v (cosine %v)", r.Summary, cos)
	}
	t.Logf("Q1_0 vs F32: %d/%d prompts diverge, match %.3f, top-1 %.3f, cosine %.4f", diverged, len(f.Prompts), r.Summary.MatchFraction, r.Summary.Top1, cos)
	// The same report judged strictly fails, naming the divergence.
	r2, err := Verify(ctx, EngineDecoder(qe), f, Criteria{MinMatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Pass || !strings.Contains(strings.Join(r2.Failures, "\n"), "first divergence at step") {
		t.Fatalf("strict: %v", r2.Failures)
	}
	// An artifact verified against a golden recorded from itself passes.
	if r := verify(t, q, record(t, q, f.Prompts, 48, 10), strict); !r.Pass {
		t.Fatalf("qmodel against its own golden: %v", r.Failures)
	}
}

// TestVerifyCorrupted: one layer of a Q1_0 artifact corrupted so that its
// attention adds a large constant vector to the residual stream (the v
// bias dominates every value row, so the attention output is that bias
// whatever the weights): the output collapses into one repeated token and
// Verify reports degeneration, not only a divergence.
func TestVerifyCorrupted(t *testing.T) {
	// Q1_0 alone makes some tiny random models loop (a real finding, but
	// not this test's); with this seed neither the source nor its Q1_0
	// artifact does, so the loop below is the corruption's.
	cfg := tinyConfig(model.Qwen2, 128)
	src := randomModel(t, cfg, 24)
	f := record(t, src, prompts(4, 128, 22), 64, 5)
	for _, p := range f.Prompts {
		if d := DetectRepetition(p.Expected, DefaultThresholds); d != nil {
			t.Fatalf("the source itself degenerates (%s): pick another seed", d)
		}
	}
	q := quantized.Model(t, src, "q1")
	bias := make([]float32, cfg.KVHeads*cfg.HeadDim)
	for i := range bias {
		bias[i] = 200 * float32(1+i%3)
	}
	bad := rewrite(t, q, "blk.1.attn_v.bias", bias)
	r := verify(t, bad, f, Criteria{FailOnDegeneration: true})
	if r.Pass || r.Summary.Degenerate != len(f.Prompts) {
		t.Fatalf("corrupted artifact: pass %v, %d degenerate prompts", r.Pass, r.Summary.Degenerate)
	}
	for _, pr := range r.Prompts {
		if pr.Degeneration == nil || pr.Degeneration.Kind != "repeat" || pr.Divergence == nil {
			t.Fatalf("%s: degeneration %v, divergence %v", pr.Name, pr.Degeneration, pr.Divergence)
		}
	}
	if msg := strings.Join(r.Failures, "\n"); !strings.Contains(msg, "degeneration (fail-on-degeneration): repeat of") {
		t.Fatalf("failures: %s", msg)
	}
	var buf bytes.Buffer
	if err := r.Table(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "FAIL") || !strings.Contains(buf.String(), "repeat of") {
		t.Fatalf("table:\n%s", buf.String())
	}
	// The uncorrupted artifact shows no degeneration.
	if r := verify(t, q, f, Criteria{FailOnDegeneration: true}); !r.Pass {
		t.Fatalf("uncorrupted Q1_0 artifact: %v", r.Failures)
	}
}

// TestLongPrompt: a 2048-token prompt records and verifies.
func TestLongPrompt(t *testing.T) {
	m := randomModel(t, tinyConfig(model.Qwen3, 2048+16), 4)
	ids := prompts(1, 128, 9)[0].IDs
	for len(ids) < 2048 {
		ids = append(ids, int32(len(ids)*7919%128))
	}
	f := record(t, m, []Prompt{{Name: "long", IDs: ids}}, 16, 4)
	r := verify(t, m, f, strict)
	if !r.Pass || r.Prompts[0].Match != 16 {
		t.Fatalf("long prompt: %+v", r)
	}
	if _, err := Record(ctx, engine(t, m), []Prompt{{IDs: append(ids, ids[:100]...)}}, 16, 0); err == nil || !strings.Contains(err.Error(), "context length") {
		t.Fatalf("over-long prompt: %v", err)
	}
}

// TestReportJSON: the JSON report round-trips and carries the fields CI reads.
func TestReportJSON(t *testing.T) {
	m := randomModel(t, tinyConfig(model.Llama, 64), 1)
	f := record(t, m, prompts(2, 128, 1), 8, 3)
	r := verify(t, m, f, strict)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"prompts", "summary", "failures", "pass"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON report lacks %q: %s", k, b)
		}
	}
	if _, err := Verify(ctx, EngineDecoder(engine(t, m)), f, Criteria{MinTop1: 2}); err == nil {
		t.Errorf("criterion 2 accepted")
	}
}

func sameIDs(a, b []int32) error {
	if len(a) != len(b) {
		return errors.New("lengths differ")
	}
	for i := range a {
		if a[i] != b[i] {
			return errors.New("tokens differ")
		}
	}
	return nil
}

// TestVerifySpeculative: verification through speculative decoding (the
// model drafting for itself, and a smaller draft) matches the golden and
// the whole-model output, and reports acceptance; a differing output is
// caught by CompareOutputs.
func TestVerifySpeculative(t *testing.T) {
	m := randomModel(t, tinyConfig(model.Qwen3, 128), 7)
	f := record(t, m, prompts(3, 128, 8), 40, 4)
	e := engine(t, m)
	whole := verify(t, m, f, strict)
	dcfg := tinyConfig(model.Qwen3, 128)
	dcfg.Layers, dcfg.LayerKinds = 1, []model.LayerKind{model.Attention}
	small := engine(t, randomModel(t, dcfg, 8))
	for _, tc := range []struct {
		draft *runtime.Engine
		all   bool
	}{{e, true}, {small, false}} {
		sd := SpeculativeDecoder(e, func() (runtime.Drafter, error) { return runtime.NewDraftModel(e, tc.draft) }, 3)
		r, err := Verify(ctx, sd, f, strict)
		if err != nil {
			t.Fatal(err)
		}
		r.Decoder, whole.Decoder = "speculative", "whole"
		r.CompareOutputs(whole)
		sp := r.Speculative
		if !r.Pass || sp == nil || sp.K != 3 || sp.Windows == 0 || (tc.all && sp.Accepted != sp.Proposed) {
			t.Fatalf("speculative verification: %v, %+v", r.Failures, sp)
		}
	}
	bad := *whole
	bad.Prompts = append([]PromptReport(nil), whole.Prompts...)
	bad.Prompts[1].Got = append([]int32{whole.Prompts[1].Got[0] + 1}, whole.Prompts[1].Got[1:]...)
	bad.Decoder = "plan"
	bad.CompareOutputs(whole)
	if bad.Pass || !strings.Contains(strings.Join(bad.Failures, ""), "plan output differs from whole at step 0") {
		t.Fatalf("CompareOutputs: %v", bad.Failures)
	}
}
