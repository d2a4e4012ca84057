package runtime

import (
	"context"
	"fmt"
	"time"
)

// A Drafter proposes tokens for exact greedy speculative decoding
// (reference §7.1). The decoder owns the sequence: it tells the drafter
// the prompt, asks for proposals after each emitted token, and reports
// which proposals the target accepted. Drafters that read the target's
// hidden states (EAGLE-3) name the layers in FeatureLayers and receive,
// for every position the target processed, the concatenation of the
// inputs to those layers.
type Drafter interface {
	// FeatureLayers lists the target layers whose input hidden states the
	// drafter needs (layer l's input is the residual stream after layer
	// l−1; l = 0 is the embeddings, l = Layers the last layer's output).
	// nil: none.
	FeatureLayers() []int
	// Start begins a sequence: the target has processed prompt, whose
	// per-position features are feats (nil without FeatureLayers).
	Start(prompt []int32, feats [][]float32) error
	// Propose returns up to k tokens that might follow the committed
	// sequence and last, the token the target emitted and has not yet
	// processed.
	Propose(last int32, k int) ([]int32, error)
	// Commit reports that the target accepted last and draft[:accepted];
	// feats are the target's features at those accepted+1 positions.
	Commit(last int32, draft []int32, accepted int, feats [][]float32) error
}

// SpecStats describe one speculative decode.
type SpecStats struct {
	Tokens      int     `json:"tokens"`       // tokens emitted
	Windows     int     `json:"windows"`      // verification calls (one target ForwardAll of K+1 positions each)
	TargetCalls int     `json:"target_calls"` // target passes: the prompt plus one per window
	Proposed    int     `json:"proposed"`     // draft tokens proposed
	Accepted    int     `json:"accepted"`     // draft tokens accepted
	Seconds     float64 `json:"seconds"`      // wall time after the prompt
	// PromptSeconds is the time of the prompt pass (target and drafter).
	PromptSeconds float64 `json:"prompt_seconds"`
}

// AcceptanceLength is the mean number of draft tokens accepted per
// window: K when every proposal is accepted, 0 when none is.
func (s SpecStats) AcceptanceLength() float64 {
	if s.Windows == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Windows)
}

// TokensPerWindow is the mean number of tokens emitted per target call
// after the prompt: the accepted draft tokens plus the target's own.
func (s SpecStats) TokensPerWindow() float64 {
	if s.Windows == 0 {
		return 0
	}
	return float64(s.Accepted+s.Windows) / float64(s.Windows)
}

// AcceptanceRate is the fraction of proposed draft tokens accepted.
func (s SpecStats) AcceptanceRate() float64 {
	if s.Proposed == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Proposed)
}

// TargetCallsPerToken is target passes per emitted token after the first
// (plain greedy decoding needs one per token).
func (s SpecStats) TargetCallsPerToken() float64 {
	if s.Tokens <= 1 {
		return 0
	}
	return float64(s.Windows) / float64(s.Tokens-1)
}

// Speculate decodes n tokens after prompt on a fresh State of the Engine
// with draft proposals of up to k tokens per window, accepting them with
// the exact greedy rule: the tokens are those Greedy returns, bit for bit.
func (e *Engine) Speculate(ctx context.Context, d Drafter, prompt []int32, n, k int) ([]int32, SpecStats, error) {
	return e.NewState().Speculate(ctx, d, prompt, n, k)
}

// speculateArgs checks what State.Speculate and Staged.Speculate take.
func speculateArgs(d Drafter, prompt []int32, k int) error {
	switch {
	case d == nil:
		return fmt.Errorf("runtime: speculate: no drafter")
	case k < 1:
		return fmt.Errorf("runtime: speculate: %d draft tokens per window, want at least 1", k)
	case len(prompt) == 0:
		return fmt.Errorf("runtime: empty prompt")
	}
	return nil
}

// Speculate is Engine.Speculate on s, which must be empty. Afterwards s
// holds the prompt and every emitted token but the last.
func (s *State) Speculate(ctx context.Context, d Drafter, prompt []int32, n, k int) ([]int32, SpecStats, error) {
	return s.speculate(ctx, d, prompt, n, k, nil)
}

// speculate is Speculate that passes each token, as it is accepted, to
// onToken if set (see acceptLoop).
func (s *State) speculate(ctx context.Context, d Drafter, prompt []int32, n, k int, onToken func(int32) error) ([]int32, SpecStats, error) {
	var st SpecStats
	e := s.e
	if err := speculateArgs(d, prompt, k); err != nil {
		return nil, st, err
	}
	switch {
	case s.Len() != 0:
		return nil, st, fmt.Errorf("runtime: speculate needs an empty state, this one holds %d positions", s.Len())
	case n <= 0:
		return nil, st, nil
	}
	if len(prompt)+n-1 > e.ctxLen {
		return nil, st, fmt.Errorf("runtime: %s: prompt of %d tokens plus %d generated exceed the context length %d", e.name, len(prompt), n, e.ctxLen)
	}
	layers := d.FeatureLayers()
	if err := e.checkFeatureLayers(layers); err != nil {
		return nil, st, err
	}
	// A window's K+1 tokens go in before the rejected ones come out.
	s.reserve(len(prompt) + n + k)
	t0 := time.Now()
	logits, feats, err := s.ForwardFeatures(prompt, layers, false)
	if err != nil {
		return nil, st, err
	}
	// DeltaNet snapshots are needed only within a window (after the
	// prompt): a window of K+1 tokens may roll back K of them.
	if e.cfg.Hybrid() {
		old := s.rollback
		s.SetRollback(k + 1)
		defer s.SetRollback(old)
	}
	if err := d.Start(prompt, feats); err != nil {
		return nil, st, err
	}
	st.TargetCalls = 1
	out := make([]int32, 1, n+k)
	out[0] = Argmax(logits[0])
	t1 := time.Now()
	st.PromptSeconds = t1.Sub(t0).Seconds()
	out, err = acceptLoop(ctx, d, out, n, k, &st, func(last int32, draft []int32) (int, int32, [][]float32, error) {
		base := s.Len()
		rows, feats, err := s.ForwardFeatures(append([]int32{last}, draft...), layers, true)
		if err != nil {
			return 0, 0, nil, err
		}
		a := 0
		for a < len(draft) && draft[a] == Argmax(rows[a]) {
			a++
		}
		if err := s.Truncate(base + a + 1); err != nil {
			return 0, 0, nil, err
		}
		if feats != nil {
			feats = feats[:a+1]
		}
		return a, Argmax(rows[a]), feats, nil
	}, onToken)
	if err != nil {
		return nil, st, err
	}
	st.Seconds = time.Since(t1).Seconds()
	st.Tokens = n
	return out[:n], st, nil
}

// verifyFunc runs the target once over a window [last, draft…] and keeps
// what it accepts: the length a of the accepted draft prefix, the target's
// own token after it, and the hidden-state features of the a+1 accepted
// rows (nil when the drafter reads none).
type verifyFunc func(last int32, draft []int32) (a int, next int32, feats [][]float32, err error)

// acceptLoop is the window loop of greedy speculative decoding, shared by
// the whole-model and the staged decode: out holds the tokens so far (at
// least the prompt's next token); each window proposes up to k tokens,
// verifies them, tells the drafter what was accepted and appends the
// accepted prefix plus the target's next token, until out holds n tokens.
// onToken, if set, gets the first n tokens of out in order: those it
// starts with, then each window's as the window is accepted. An error
// from it ends the loop and is returned.
func acceptLoop(ctx context.Context, d Drafter, out []int32, n, k int, st *SpecStats, verify verifyFunc, onToken func(int32) error) ([]int32, error) {
	emit := func(ids []int32) error {
		if onToken == nil {
			return nil
		}
		for _, id := range ids {
			if err := onToken(id); err != nil {
				return err
			}
		}
		return nil
	}
	if err := emit(out[:min(len(out), n)]); err != nil {
		return nil, err
	}
	for len(out) < n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		last := out[len(out)-1]
		// No proposal past what is asked for: drafts end at the n-th
		// token. A last window accepted whole still adds the target's
		// bonus token, the (n+1)-th, which the callers drop.
		draft, err := propose(d, last, min(k, n-len(out)))
		if err != nil {
			return nil, err
		}
		a, next, feats, err := verify(last, draft)
		if err != nil {
			return nil, err
		}
		if err := d.Commit(last, draft, a, feats); err != nil {
			return nil, err
		}
		w := len(out)
		out = append(out, draft[:a]...)
		out = append(out, next)
		st.Windows++
		st.TargetCalls++
		st.Proposed += len(draft)
		st.Accepted += a
		// The last window's bonus token may be the (n+1)-th.
		if err := emit(out[w:min(len(out), n)]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (e *Engine) checkFeatureLayers(layers []int) error {
	for i, l := range layers {
		if l < 0 || l > len(e.layers) {
			return fmt.Errorf("runtime: %s: feature layer %d outside [0, %d]", e.name, l, len(e.layers))
		}
		if i > 0 && l < layers[i-1] {
			return fmt.Errorf("runtime: feature layers %v are not in ascending order", layers)
		}
	}
	return nil
}

// ForwardFeatures is ForwardAll (all set) or Forward that also returns,
// for every token, the concatenated input hidden states of the given
// layers (see Drafter.FeatureLayers), in the order given. Logits are the
// last token's only (one row) unless all is set. Results are
// bit-identical to Forward's: the layers run in the same batches, merely
// split where a feature is read.
func (s *State) ForwardFeatures(tokens []int32, layers []int, all bool) (logits, feats [][]float32, err error) {
	e := s.e
	if len(tokens) == 0 {
		return nil, nil, fmt.Errorf("runtime: no tokens to process")
	}
	if err := e.checkFeatureLayers(layers); err != nil {
		return nil, nil, err
	}
	if len(layers) == 0 {
		if !all {
			l, err := s.Forward(tokens)
			return [][]float32{l}, nil, err
		}
		rows, err := s.ForwardAll(tokens)
		return rows, nil, err
	}
	for _, t := range tokens {
		if err := e.checkToken(t); err != nil {
			return nil, nil, err
		}
	}
	if n := s.Len() + len(tokens); n > e.ctxLen {
		return nil, nil, fmt.Errorf("runtime: %s: %d positions (%d held + %d new) exceed the context length %d", e.name, n, s.Len(), len(tokens), e.ctxLen)
	}
	for i := range s.layers {
		if s.layers[i].n != s.Len() {
			return nil, nil, fmt.Errorf("runtime: layer %d holds %d positions, layer 0 %d: finish the partial pass first", i, s.layers[i].n, s.Len())
		}
	}
	h, v := e.cfg.Hidden, e.cfg.VocabSize
	nf := len(layers)
	flatF := make([]float32, len(tokens)*nf*h)
	nl := 1
	if all {
		nl = len(tokens)
	}
	flatL := make([]float32, nl*v)
	bs := min(e.batch, len(tokens))
	x := make([]float32, bs*h)
	for b0 := 0; b0 < len(tokens); b0 += bs {
		batch := tokens[b0:min(b0+bs, len(tokens))]
		t := len(batch)
		xb := x[:t*h]
		if err := e.Embed(batch, xb); err != nil {
			return nil, nil, err
		}
		at := 0
		for j, l := range layers {
			if err := s.RunLayers(at, l, xb, nil, nil); err != nil {
				return nil, nil, err
			}
			at = l
			for i := 0; i < t; i++ {
				copy(flatF[((b0+i)*nf+j)*h:((b0+i)*nf+j+1)*h], xb[i*h:(i+1)*h])
			}
		}
		if err := s.RunLayers(at, len(e.layers), xb, nil, nil); err != nil {
			return nil, nil, err
		}
		switch {
		case all:
			if err := s.Head(xb, flatL[b0*v:(b0+t)*v]); err != nil {
				return nil, nil, err
			}
		case b0+t == len(tokens):
			if err := s.Head(xb[(t-1)*h:], flatL); err != nil {
				return nil, nil, err
			}
		}
	}
	logits = make([][]float32, nl)
	for i := range logits {
		logits[i] = flatL[i*v : (i+1)*v : (i+1)*v]
	}
	feats = make([][]float32, len(tokens))
	for i := range feats {
		feats[i] = flatF[i*nf*h : (i+1)*nf*h : (i+1)*nf*h]
	}
	return logits, feats, nil
}

// DraftModel is a Drafter backed by a separate, usually smaller model
// with the target's vocabulary (reference §7.5). It runs its own State
// autoregressively for K steps and is rolled back to the accepted length,
// DeltaNet state included.
type DraftModel struct {
	st      *State
	pending []int32 // committed tokens the draft has not processed yet
	base    int     // committed positions before the last proposal
}

// NewDraftModel returns a drafter running draft for target. Their
// vocabularies must have the same size.
func NewDraftModel(target, draft *Engine) (*DraftModel, error) {
	if target.cfg.VocabSize != draft.cfg.VocabSize {
		return nil, fmt.Errorf("runtime: draft %s has a vocabulary of %d tokens, target %s %d: a draft model must share the target's tokenizer",
			draft.name, draft.cfg.VocabSize, target.name, target.cfg.VocabSize)
	}
	return &DraftModel{st: draft.NewState()}, nil
}

// FeatureLayers is nil: a draft model reads only tokens.
func (d *DraftModel) FeatureLayers() []int { return nil }

// Start resets the draft's state; the prompt is processed with the first
// proposal.
func (d *DraftModel) Start(prompt []int32, _ [][]float32) error {
	d.st.Reset()
	d.pending = append(d.pending[:0], prompt...)
	return nil
}

// Propose runs the draft greedily for k tokens after the committed
// sequence and last.
func (d *DraftModel) Propose(last int32, k int) ([]int32, error) {
	if k < 1 {
		return nil, nil
	}
	s := d.st
	hybrid := s.e.cfg.Hybrid()
	d.base = s.Len() + len(d.pending)
	// Stay inside the draft's context: propose fewer tokens near its end.
	k = min(k, s.e.ctxLen-d.base)
	if k < 1 {
		return nil, nil
	}
	// Committed tokens are never rolled back: process them without
	// DeltaNet snapshots, then keep snapshots from last on (Commit may
	// roll back to just after it).
	if len(d.pending) > 0 {
		if hybrid {
			s.SetRollback(0)
		}
		if _, err := s.Forward(d.pending); err != nil {
			return nil, err
		}
		d.pending = d.pending[:0]
	}
	if hybrid {
		s.SetRollback(k)
	}
	logits, err := s.Forward([]int32{last})
	if err != nil {
		return nil, err
	}
	draft := make([]int32, 0, k)
	draft = append(draft, Argmax(logits))
	for len(draft) < k {
		if logits, err = s.Forward(draft[len(draft)-1:]); err != nil {
			return nil, err
		}
		draft = append(draft, Argmax(logits))
	}
	return draft, nil
}

// Commit rolls the draft back to the committed tokens: it processed last
// and draft[:len(draft)−1]; of those it keeps last and the accepted ones.
func (d *DraftModel) Commit(last int32, draft []int32, accepted int, _ [][]float32) error {
	if len(draft) == 0 {
		d.pending = append(d.pending, last)
		return nil
	}
	keep := d.base + 1 + accepted
	if keep > d.st.Len() {
		// Every proposal was accepted; the last one was never processed.
		d.pending = append(d.pending, draft[d.st.Len()-d.base-1:accepted]...)
		keep = d.st.Len()
	}
	return d.st.Truncate(keep)
}

// propose asks d for at most k draft tokens after last, refusing a drafter
// that returns more than asked.
func propose(d Drafter, last int32, k int) ([]int32, error) {
	draft, err := d.Propose(last, k)
	if err != nil {
		return nil, err
	}
	if len(draft) > k {
		return nil, fmt.Errorf("runtime: speculate: drafter proposed %d tokens, %d asked for", len(draft), k)
	}
	return draft, nil
}
