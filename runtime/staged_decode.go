package runtime

import (
	"context"
	"fmt"
	"time"
)

// The decode API of Staged (Forward, Verify, Greedy, Generate,
// TeacherForced, Speculate), built on the KV manager's Submit and Commit
// in staged_kv.go.

// forward processes tokens after the committed sequence in as many calls
// as the plan needs, committing every row, and returns the logits of the
// new tokens (only the last row unless all).
func (s *Staged) forward(tokens []int32, all bool) ([][]float32, error) {
	if s.step != nil {
		return nil, fmt.Errorf("runtime: staged: the previous step is not committed")
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("runtime: no tokens to process")
	}
	for _, t := range tokens {
		if err := s.e.checkToken(t); err != nil {
			return nil, err
		}
	}
	var out [][]float32
	rest := tokens
	for len(rest) > 0 {
		v, rows, reproc, n, err := s.callRows(rest, false)
		if err != nil {
			return nil, err
		}
		rows, reproc = rows[:n], min(reproc, n)
		parent := make([]int, n)
		for r := range parent {
			parent[r] = r - 1
		}
		st, err := s.process(v, rows, parent, reproc, n)
		if err != nil {
			return nil, err
		}
		if err := s.Commit(nil); err != nil {
			return nil, err
		}
		fresh := st.logits[reproc:]
		rest = rest[n-reproc:]
		if all {
			out = append(out, fresh...)
		} else if len(rest) == 0 && len(fresh) > 0 {
			out = append(out, fresh[len(fresh)-1])
		}
	}
	return out, nil
}

// Forward processes tokens after the committed sequence (in as many
// calls as the plan needs, each committed) and returns the logits after
// the last one, like State.Forward.
func (s *Staged) Forward(tokens []int32) ([]float32, error) {
	rows, err := s.forward(tokens, false)
	if err != nil {
		return nil, err
	}
	return rows[0], nil
}

// ForwardAll is Forward returning the logits after every token.
func (s *Staged) ForwardAll(tokens []int32) ([][]float32, error) {
	return s.forward(tokens, true)
}

// Verify is one exact greedy speculative step through the plan, like
// State.Verify: it submits [last, draft…] as one call, accepts the longest
// prefix of draft greedy decoding would produce with a selection mask of
// n_process entries, and returns the accepted count and the bonus token.
func (s *Staged) Verify(last int32, draft []int32) (accepted int, next int32, err error) {
	rows, err := s.Submit(append([]int32{last}, draft...), nil)
	if err != nil {
		return 0, -1, err
	}
	a := 0
	for a < len(draft) && draft[a] == Argmax(rows[a]) {
		a++
	}
	st := s.step
	sel := make([]bool, len(st.tokens))
	for r := 0; r < st.reproc+a+1; r++ {
		sel[r] = true
	}
	if err := s.Commit(sel); err != nil {
		return 0, -1, err
	}
	return a, Argmax(rows[a]), nil
}

// Greedy returns the n tokens greedy decoding generates after prompt,
// decoded through the plan from an empty sequence.
func (s *Staged) Greedy(ctx context.Context, prompt []int32, n int) ([]int32, error) {
	return s.Generate(ctx, prompt, n, nil)
}

// Generate decodes greedily through the plan from an empty sequence,
// calling fn (if not nil) with every step like State.Generate, and
// returns the generated tokens. The last one is not processed.
func (s *Staged) Generate(ctx context.Context, prompt []int32, n int, fn func(Step) bool) ([]int32, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("runtime: empty prompt")
	}
	s.Reset()
	if n <= 0 {
		return nil, nil
	}
	out := make([]int32, 0, n)
	err := Generate(ctx, s, prompt, n, func(st Step) bool {
		out = append(out, st.Token)
		return fn == nil || fn(st)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TeacherForced returns len(cont) rows of logits decoded through the
// plan: row i is the distribution after prompt and cont[:i].
func (s *Staged) TeacherForced(ctx context.Context, prompt, cont []int32) ([][]float32, error) {
	if len(cont) == 0 {
		return nil, nil
	}
	if len(prompt) == 0 {
		return nil, fmt.Errorf("runtime: empty prompt")
	}
	s.Reset()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	first, err := s.Forward(prompt)
	if err != nil {
		return nil, err
	}
	rows := [][]float32{first}
	if len(cont) > 1 {
		more, err := s.ForwardAll(cont[:len(cont)-1])
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	}
	return rows, nil
}

// Speculate is exact greedy speculative decoding through the plan: every
// window is one Submit of [last, draft…] and one Commit whose selection
// mask keeps the accepted prefix. A drafter that reads target hidden
// states (EAGLE-3, MTP) gets them from the stage calls (SetFeatureLayers),
// the accepted rows' only. The tokens equal Greedy's, and the drafter sees
// exactly what Engine.Speculate gives it, so the acceptance is the same.
func (s *Staged) Speculate(ctx context.Context, d Drafter, prompt []int32, n, k int) ([]int32, SpecStats, error) {
	return s.speculate(ctx, d, prompt, n, k, nil)
}

// speculate is Speculate that passes each token, as it is accepted, to
// onToken if set (see acceptLoop).
func (s *Staged) speculate(ctx context.Context, d Drafter, prompt []int32, n, k int, onToken func(int32) error) ([]int32, SpecStats, error) {
	var st SpecStats
	if err := speculateArgs(d, prompt, k); err != nil {
		return nil, st, err
	}
	switch {
	case n <= 0:
		return nil, st, nil
	}
	s.Reset()
	old := s.feat.layers
	if err := s.SetFeatureLayers(d.FeatureLayers()); err != nil {
		return nil, st, err
	}
	defer func() { s.feat.layers, s.feat.pending = old, nil }()
	t0 := time.Now()
	logits, err := s.Forward(prompt)
	if err != nil {
		return nil, st, err
	}
	if err := d.Start(prompt, s.TakeFeatures()); err != nil {
		return nil, st, err
	}
	st.TargetCalls = 1
	out := []int32{Argmax(logits)}
	t1 := time.Now()
	st.PromptSeconds = t1.Sub(t0).Seconds()
	out, err = acceptLoop(ctx, d, out, n, k, &st, func(last int32, draft []int32) (int, int32, [][]float32, error) {
		a, next, err := s.Verify(last, draft)
		if err != nil {
			return 0, 0, nil, err
		}
		return a, next, s.TakeFeatures(), nil
	}, onToken)
	if err != nil {
		return nil, st, err
	}
	st.Seconds = time.Since(t1).Seconds()
	st.Tokens = n
	return out[:n], st, nil
}
