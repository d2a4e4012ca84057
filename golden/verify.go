package golden

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/qnnprep/qnnprep/runtime"
)

// Decoder is what a golden file is recorded from and verified through:
// the whole-model runtime (EngineDecoder) or a staged executor that runs
// the shard plan's stages.
type Decoder interface {
	// Greedy returns the n tokens greedy decoding generates after prompt.
	Greedy(ctx context.Context, prompt []int32, n int) ([]int32, error)
	// TeacherForced returns len(cont) rows of logits: row i is the
	// distribution after prompt and cont[:i], the one that predicts cont[i].
	TeacherForced(ctx context.Context, prompt, cont []int32) ([][]float32, error)
}

// EngineDecoder decodes with the whole model on one runtime State, emptied
// before each use: a State per prompt and pass would hold its scratch and
// cache again until a collection.
func EngineDecoder(e *runtime.Engine) Decoder { return &engineDecoder{e: e} }

type engineDecoder struct {
	e  *runtime.Engine
	st *runtime.State
}

// state returns the decoder's State, empty.
func (d *engineDecoder) state() *runtime.State {
	if d.st == nil {
		d.st = d.e.NewState()
	}
	d.st.Reset()
	return d.st
}

func (d *engineDecoder) Greedy(ctx context.Context, prompt []int32, n int) ([]int32, error) {
	return d.state().Greedy(ctx, prompt, n)
}

// TeacherForced processes the prompt keeping only its last row, so that a
// long prompt costs no more than one vocabulary row of memory.
func (d *engineDecoder) TeacherForced(ctx context.Context, prompt, cont []int32) ([][]float32, error) {
	if len(cont) == 0 {
		return nil, nil
	}
	if len(prompt)+len(cont)-1 > d.e.ContextLength() {
		return nil, fmt.Errorf("prompt of %d tokens plus %d expected exceed the context length %d", len(prompt), len(cont), d.e.ContextLength())
	}
	st := d.state()
	first, err := st.Forward(prompt)
	if err != nil {
		return nil, err
	}
	rows := [][]float32{first}
	if len(cont) > 1 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		more, err := st.ForwardAll(cont[:len(cont)-1])
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	}
	return rows, nil
}

// Producer is written into Settings.Producer by Record.
var Producer = "qnnprep"

// Record decodes every prompt greedily for n tokens on e and returns a
// golden file holding the continuations and, when topK > 0, the topK
// largest logits of every step. The caller fills in File.Model.
func Record(ctx context.Context, e *runtime.Engine, prompts []Prompt, n, topK int) (*File, error) {
	if n < 1 {
		return nil, fmt.Errorf("golden: record %d tokens, want at least 1", n)
	}
	if topK < 0 || topK > e.VocabSize() {
		return nil, fmt.Errorf("golden: top-k %d outside [0, %d]", topK, e.VocabSize())
	}
	f := &File{Version: Version, Settings: Settings{Decoding: "greedy", Steps: n, TopK: topK, Producer: Producer}}
	st := e.NewState() // emptied for each prompt: one scratch and cache
	for i, p := range prompts {
		if len(p.IDs) == 0 {
			return nil, fmt.Errorf("golden: prompt %d (%s) has no tokens", i, p.Name)
		}
		if len(p.IDs)+n-1 > e.ContextLength() {
			return nil, fmt.Errorf("golden: prompt %d (%s): %d tokens plus %d generated exceed the context length %d", i, p.Name, len(p.IDs), n, e.ContextLength())
		}
		out := Prompt{Name: p.Name, Text: p.Text, IDs: append([]int32(nil), p.IDs...)}
		if out.Name == "" {
			out.Name = fmt.Sprintf("p%d", i)
		}
		st.Reset()
		err := st.Generate(ctx, p.IDs, n, func(s runtime.Step) bool {
			out.Expected = append(out.Expected, s.Token)
			if topK > 0 {
				out.TopK = append(out.TopK, TopK(s.Logits, topK))
			}
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("golden: prompt %d (%s): %w", i, out.Name, err)
		}
		f.Prompts = append(f.Prompts, out)
	}
	return f, nil
}

// Criteria decide whether a verification passes. A zero value passes
// everything but runtime errors; verify and build start from
// DefaultCriteria.
type Criteria struct {
	MinMatch           float64    `json:"min_match"`            // every prompt's exact-match fraction (matched / expected tokens) at least this
	MinTop1            float64    `json:"min_top1"`             // every prompt's teacher-forced top-1 agreement at least this
	MinCosine          float64    `json:"min_cosine"`           // every prompt's mean logit cosine at least this (needs top-k in the golden)
	FailOnDegeneration bool       `json:"fail_on_degeneration"` // fail when an output collapses into repetition the golden does not have
	Repetition         Thresholds `json:"-"`
	// Basis says where the thresholds come from ("default for …",
	// "--min-top1 given", …); reports print it.
	Basis string `json:"basis,omitempty"`
}

// String lists the thresholds, as reports print them.
func (c Criteria) String() string {
	deg := "ignored"
	if c.FailOnDegeneration {
		deg = "fails"
	}
	s := fmt.Sprintf("min-match %.3f, min-top1 %.3f, min-cosine %.4f, degeneration %s", c.MinMatch, c.MinTop1, c.MinCosine, deg)
	if c.Basis != "" {
		s += " (" + c.Basis + ")"
	}
	return s
}

// Report is the outcome of Verify: JSON for CI, Table for people.
type Report struct {
	Golden   string `json:"golden,omitempty"`
	Artifact string `json:"artifact,omitempty"`
	Decoder  string `json:"decoder,omitempty"` // "whole", "plan …", "speculative …"
	// Source is why the golden was accepted for the artifact.
	Source *Acceptance `json:"source,omitempty"`
	// Criteria are the thresholds the verdict applied.
	Criteria Criteria `json:"criteria"`
	Warnings []string `json:"warnings,omitempty"`
	// Speculative holds acceptance statistics when the decoder is a SpecDecoder.
	Speculative *SpecReport    `json:"speculative,omitempty"`
	Prompts     []PromptReport `json:"prompts"`
	Summary     Summary        `json:"summary"`
	Failures    []string       `json:"failures"`
	Pass        bool           `json:"pass"`
}

// Summary aggregates a Report over its prompts.
type Summary struct {
	Prompts       int      `json:"prompts"`
	ExactPrompts  int      `json:"exact_prompts"` // prompts whose whole continuation matched
	Tokens        int      `json:"tokens"`        // expected tokens
	Matched       int      `json:"matched"`       // tokens before each prompt's first divergence
	MatchFraction float64  `json:"match_fraction"`
	Top1          float64  `json:"top1_agreement"`
	Cosine        *float64 `json:"cosine,omitempty"`
	Degenerate    int      `json:"degenerate_prompts"`
}

// PromptReport is one prompt's findings.
type PromptReport struct {
	Name          string        `json:"name"`
	Tokens        int           `json:"tokens"`
	Match         int           `json:"match"` // exact-match length
	MatchFraction float64       `json:"match_fraction"`
	Divergence    *Divergence   `json:"divergence,omitempty"`
	Top1          float64       `json:"top1_agreement"` // teacher-forced argmax == expected token, fraction of steps
	Cosine        *float64      `json:"cosine,omitempty"`
	Degeneration  *Degeneration `json:"degeneration,omitempty"`
	Got           []int32       `json:"got"`
}

// Divergence is the first step where the artifact's greedy token differs
// from the golden's, with both sides' five largest logits there.
type Divergence struct {
	Step        int     `json:"step"`
	Expected    int32   `json:"expected"`
	Got         int32   `json:"got"`
	ExpectedTop []Logit `json:"expected_top5,omitempty"`
	GotTop      []Logit `json:"got_top5"`
}

// Verify decodes every golden prompt through d and reports exact-match
// length, first divergence, teacher-forced top-1 agreement, mean logit
// cosine over the golden's stored top-k ids, and degeneration, judged by
// c. Runtime failures are errors; criteria failures are in the Report.
func Verify(ctx context.Context, d Decoder, f *File, c Criteria) (*Report, error) {
	for _, v := range []struct {
		name string
		v    float64
	}{{"minimum match", c.MinMatch}, {"minimum top-1", c.MinTop1}, {"minimum cosine", c.MinCosine}} {
		if !(v.v >= 0 && v.v <= 1) {
			return nil, fmt.Errorf("golden: %s %v outside [0, 1]", v.name, v.v)
		}
	}
	th := c.Repetition
	if th == (Thresholds{}) {
		th = DefaultThresholds
	}
	if len(f.Prompts) == 0 {
		return nil, fmt.Errorf("golden: %s: no prompts", f.Name())
	}
	r := &Report{Failures: []string{}, Criteria: c}
	var cosSum float64
	cosN, top1Sum := 0, 0.0
	for i := range f.Prompts {
		p := &f.Prompts[i]
		pr, err := verifyPrompt(ctx, d, p, th)
		if err != nil {
			return nil, fmt.Errorf("golden: prompt %d (%s): %w", i, p.Name, err)
		}
		r.Prompts = append(r.Prompts, *pr)
		s := &r.Summary
		s.Prompts++
		s.Tokens += pr.Tokens
		s.Matched += pr.Match
		if pr.Divergence == nil {
			s.ExactPrompts++
		}
		top1Sum += pr.Top1 * float64(pr.Tokens)
		if pr.Cosine != nil {
			cosSum += *pr.Cosine * float64(pr.Tokens)
			cosN += pr.Tokens
		}
		if pr.Degeneration != nil {
			s.Degenerate++
		}
		fail := func(format string, args ...any) {
			r.Failures = append(r.Failures, fmt.Sprintf("prompt %s: ", pr.Name)+fmt.Sprintf(format, args...))
		}
		if pr.MatchFraction < c.MinMatch {
			fail("exact match %d/%d (%.3f) below min-match %.3f; first divergence at step %d: expected %d, got %d",
				pr.Match, pr.Tokens, pr.MatchFraction, c.MinMatch, pr.Divergence.Step, pr.Divergence.Expected, pr.Divergence.Got)
		}
		if pr.Top1 < c.MinTop1 {
			fail("teacher-forced top-1 agreement %.3f below min-top1 %.3f", pr.Top1, c.MinTop1)
		}
		if c.MinCosine > 0 {
			if pr.Cosine == nil {
				fail("no logit cosine for min-cosine %.4f: the golden file holds no top-k logits (record with --top-k)", c.MinCosine)
			} else if *pr.Cosine < c.MinCosine {
				fail("logit cosine %.4f below min-cosine %.4f", *pr.Cosine, c.MinCosine)
			}
		}
		if c.FailOnDegeneration && pr.Degeneration != nil {
			fail("degeneration (fail-on-degeneration): %s", pr.Degeneration)
		}
	}
	s := &r.Summary
	if s.Tokens > 0 {
		s.MatchFraction = float64(s.Matched) / float64(s.Tokens)
		s.Top1 = top1Sum / float64(s.Tokens)
	}
	if cosN > 0 {
		v := cosSum / float64(cosN)
		s.Cosine = &v
	}
	if sd, ok := d.(*SpecDecoder); ok {
		r.Speculative = sd.report()
	}
	r.Pass = len(r.Failures) == 0
	return r, nil
}

// CompareOutputs adds a failure to r for every prompt whose output differs
// from ref's (same golden file): speculative or staged decoding must give
// exactly the whole-model greedy tokens.
func (r *Report) CompareOutputs(ref *Report) {
	for i := range r.Prompts {
		if i >= len(ref.Prompts) {
			break
		}
		a, b := r.Prompts[i].Got, ref.Prompts[i].Got
		for j := range a {
			if j >= len(b) || a[j] != b[j] {
				r.Failures = append(r.Failures, fmt.Sprintf("prompt %s: %s output differs from %s at step %d", r.Prompts[i].Name, r.Decoder, ref.Decoder, j))
				break
			}
		}
	}
	r.Pass = len(r.Failures) == 0
}

func verifyPrompt(ctx context.Context, d Decoder, p *Prompt, th Thresholds) (*PromptReport, error) {
	n := len(p.Expected)
	pr := &PromptReport{Name: p.Name, Tokens: n, Got: []int32{}}
	if n == 0 {
		return nil, errors.New("no expected tokens")
	}
	got, err := d.Greedy(ctx, p.IDs, n)
	if err != nil {
		return nil, err
	}
	if len(got) != n {
		return nil, fmt.Errorf("decoder returned %d tokens, want %d", len(got), n)
	}
	pr.Got = got
	rows, err := d.TeacherForced(ctx, p.IDs, p.Expected)
	if err != nil {
		return nil, err
	}
	if len(rows) != n {
		return nil, fmt.Errorf("decoder returned %d teacher-forced rows, want %d", len(rows), n)
	}
	for pr.Match < n && got[pr.Match] == p.Expected[pr.Match] {
		pr.Match++
	}
	pr.MatchFraction = float64(pr.Match) / float64(n)
	if s := pr.Match; s < n {
		// Up to the divergence the free run saw exactly the teacher-forced
		// prefix, so row s holds the logits the artifact chose got[s] from.
		dv := &Divergence{Step: s, Expected: p.Expected[s], Got: got[s], GotTop: TopK(rows[s], 5)}
		if len(p.TopK) > s {
			dv.ExpectedTop = p.TopK[s][:min(5, len(p.TopK[s]))]
		}
		pr.Divergence = dv
	}
	agree := 0
	var cos float64
	for i, row := range rows {
		if Argmax(row) == p.Expected[i] {
			agree++
		}
		if len(p.TopK) == n {
			c, err := cosineAt(row, p.TopK[i])
			if err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
			cos += c
		}
	}
	pr.Top1 = float64(agree) / float64(n)
	if len(p.TopK) == n {
		c := cos / float64(n)
		pr.Cosine = &c
	}
	pr.Degeneration = Collapsed(got, p.Expected, th)
	return pr, nil
}

// cosineAt is the cosine between the golden's top-k logits and the
// artifact's logits at the same ids.
func cosineAt(row []float32, top []Logit) (float64, error) {
	var dot, na, nb float64
	for _, l := range top {
		if l.ID < 0 || int(l.ID) >= len(row) {
			return 0, fmt.Errorf("top-k id %d outside the vocabulary of %d", l.ID, len(row))
		}
		a, b := float64(l.Logit), float64(row[l.ID])
		dot += a * b
		na += a * a
		nb += b * b
	}
	if na == 0 || nb == 0 {
		if na == nb {
			return 1, nil
		}
		return 0, nil
	}
	return dot / math.Sqrt(na*nb), nil
}

// Table writes the report for people: one row per prompt, then the summary
// and the failures.
func (r *Report) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "prompt\ttokens\tmatch\tfirst divergence\ttop-1\tcosine\tdegeneration")
	for _, p := range r.Prompts {
		div := "-"
		if d := p.Divergence; d != nil {
			div = fmt.Sprintf("step %d: want %d, got %d", d.Step, d.Expected, d.Got)
		}
		deg := "-"
		if p.Degeneration != nil {
			deg = p.Degeneration.String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.3f\t%s\t%s\n", p.Name, p.Tokens, p.Match, div, p.Top1, fmtCos(p.Cosine), deg)
	}
	s := r.Summary
	fmt.Fprintf(tw, "all\t%d\t%d\t%d/%d exact\t%.3f\t%s\t%d degenerate\n", s.Tokens, s.Matched, s.ExactPrompts, s.Prompts, s.Top1, fmtCos(s.Cosine), s.Degenerate)
	if err := tw.Flush(); err != nil {
		return err
	}
	if sp := r.Speculative; sp != nil {
		fmt.Fprintf(w, "\nspeculative, K=%d: acceptance length %.2f of %d (%.2f tokens per target call, %.3f target calls per token), %d/%d proposals accepted\n",
			sp.K, sp.AcceptanceLength, sp.K, sp.TokensPerWindow, sp.TargetCallsPerToken, sp.Accepted, sp.Proposed)
	}
	for _, p := range r.Prompts {
		if d := p.Divergence; d != nil {
			fmt.Fprintf(w, "\n%s diverges at step %d:\n  expected top-5 %s\n  got      top-5 %s\n", p.Name, d.Step, fmtTop(d.ExpectedTop), fmtTop(d.GotTop))
		}
	}
	if r.Source != nil {
		fmt.Fprintf(w, "\ngolden accepted: %s\n", r.Source)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	fmt.Fprintf(w, "thresholds: %s\n", r.Criteria)
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\n%s", verdict)
	if len(r.Failures) > 0 {
		fmt.Fprintf(w, ": %d failure(s)\n  %s", len(r.Failures), strings.Join(r.Failures, "\n  "))
	}
	_, err := fmt.Fprintln(w)
	return err
}

func fmtCos(c *float64) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%.4f", *c)
}

func fmtTop(top []Logit) string {
	if len(top) == 0 {
		return "(not recorded)"
	}
	s := make([]string, len(top))
	for i, l := range top {
		s[i] = fmt.Sprintf("%d:%.3f", l.ID, l.Logit)
	}
	return strings.Join(s, " ")
}
