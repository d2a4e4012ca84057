package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// CompareOptions is one speculative decode set against plain greedy
// decoding (qnnprep speculate).
type CompareOptions struct {
	Drafts DraftSource
	// Options are the draft model's engine options (threads, context).
	Options Options
	// Plan, if set, is a plan file: both decodes then run through its
	// stages (the staged executor).
	Plan   string
	Prompt []int32
	Tokens int // tokens to generate
	K      int // draft tokens per window
	// OnToken, if set, is called with each token of the speculative
	// decode as soon as its window is accepted (qnnprep speculate streams
	// the text with it). An error from it ends the decode and is returned.
	// The time it takes counts in SpecTokensPerSec.
	OnToken func(id int32) error
}

// Comparison is what CompareSpeculative measured (qnnprep speculate --json).
type Comparison struct {
	Model               string    `json:"model"`
	Drafter             string    `json:"drafter"` // "draft MODEL", "eagle3 HEAD" or "mtp"
	Plan                string    `json:"plan,omitempty"`
	K                   int       `json:"k"`
	Prompt              []int32   `json:"prompt_ids"`
	Generated           []int32   `json:"ids"`
	EqualsGreedy        bool      `json:"equals_greedy"`
	Stats               SpecStats `json:"stats"`
	AcceptanceLength    float64   `json:"acceptance_length"` // mean draft tokens accepted per window
	TokensPerWindow     float64   `json:"tokens_per_window"`
	TargetCallsPerToken float64   `json:"target_calls_per_token"`
	GreedySeconds       float64   `json:"greedy_seconds"`
	GreedyTokensPerSec  float64   `json:"greedy_tokens_per_s"`
	SpecTokensPerSec    float64   `json:"speculative_tokens_per_s"`
}

// CompareSpeculative decodes o.Tokens tokens after o.Prompt on target (the
// Engine of m) greedily, then speculatively with o.Drafts (OpenDrafts),
// whole or through o.Plan, and reports whether the two agree (they must:
// acceptance is exact) and the speculative statistics and speeds. Both
// are timed after the prompt's pass.
func CompareSpeculative(ctx context.Context, target *Engine, m *model.Model, o CompareOptions) (*Comparison, error) {
	res := &Comparison{K: o.K, Prompt: o.Prompt}
	ds, err := OpenDrafts(target, m, o.Drafts, o.Options)
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	res.Drafter = ds.Name

	n := o.Tokens
	if len(o.Prompt)+n-1 > target.ContextLength() {
		return nil, fmt.Errorf("prompt of %d tokens plus %d generated exceed the context length %d (see --ctx)", len(o.Prompt), n, target.ContextLength())
	}
	var want []int32
	var t1 time.Time
	record := func(s Step) bool {
		if s.Index == 0 {
			t1 = time.Now()
		}
		want = append(want, s.Token)
		return true
	}
	var speculate func(context.Context, Drafter, []int32, int, int, func(int32) error) ([]int32, SpecStats, error)
	if o.Plan != "" {
		p, err := shard.ReadPlan(o.Plan)
		if err != nil {
			return nil, err
		}
		st, err := NewStaged(target, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Plan, err)
		}
		res.Plan = o.Plan
		if _, err = st.Generate(ctx, o.Prompt, n, record); err != nil {
			return nil, err
		}
		speculate = st.speculate
	} else {
		// The greedy pass's State, emptied, then serves the speculative one:
		// its scratch and cache are not held twice.
		gs := target.NewState()
		if err = gs.Generate(ctx, o.Prompt, n, record); err != nil {
			return nil, err
		}
		gs.Reset()
		speculate = gs.speculate
	}
	res.GreedySeconds = time.Since(t1).Seconds()
	d, err := ds.New()
	if err != nil {
		return nil, err
	}
	got, st, err := speculate(ctx, d, o.Prompt, n, o.K, o.OnToken)
	if err != nil {
		return nil, err
	}
	res.Generated, res.Stats = got, st
	res.EqualsGreedy = len(got) == len(want)
	for i := range want {
		if res.EqualsGreedy && got[i] != want[i] {
			res.EqualsGreedy = false
		}
	}
	res.AcceptanceLength, res.TokensPerWindow, res.TargetCallsPerToken = st.AcceptanceLength(), st.TokensPerWindow(), st.TargetCallsPerToken()
	if res.GreedySeconds > 0 {
		res.GreedyTokensPerSec = float64(n-1) / res.GreedySeconds
	}
	if st.Seconds > 0 {
		res.SpecTokensPerSec = float64(n-1) / st.Seconds
	}
	return res, nil
}
