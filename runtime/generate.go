package runtime

import (
	"context"
	"fmt"
)

// Forward processes tokens after the State's current position (prefill in
// batches of Options.Batch) and returns the logits after the last one.
// The result is bit-identical to calling Forward once per token.
func (s *State) Forward(tokens []int32) ([]float32, error) {
	return s.ForwardContext(context.Background(), tokens)
}

// ForwardContext is Forward that stops between batches once ctx is done,
// returning its error; the State is then partly advanced (discard it or
// Truncate it). A long prompt can be interrupted this way.
func (s *State) ForwardContext(ctx context.Context, tokens []int32) ([]float32, error) {
	logits := make([]float32, s.e.cfg.VocabSize)
	if err := s.forward(ctx, tokens, logits, false); err != nil {
		return nil, err
	}
	return logits, nil
}

// ForwardAll is Forward returning the logits after every token (teacher
// forcing): row i predicts the token after tokens[i].
func (s *State) ForwardAll(tokens []int32) ([][]float32, error) {
	v := s.e.cfg.VocabSize
	flat := make([]float32, len(tokens)*v)
	if err := s.forward(context.Background(), tokens, flat, true); err != nil {
		return nil, err
	}
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = flat[i*v : (i+1)*v : (i+1)*v]
	}
	return rows, nil
}

// forward runs tokens through all layers in batches. logits receives the
// last token's row, or every row when all is set. It checks ctx before
// each batch.
func (s *State) forward(ctx context.Context, tokens []int32, logits []float32, all bool) error {
	e := s.e
	if len(tokens) == 0 {
		return fmt.Errorf("runtime: no tokens to process")
	}
	for _, t := range tokens {
		if err := e.checkToken(t); err != nil {
			return err
		}
	}
	if n := s.Len() + len(tokens); n > e.ctxLen {
		return fmt.Errorf("runtime: %s: %d positions (%d held + %d new) exceed the context length %d", e.name, n, s.Len(), len(tokens), e.ctxLen)
	}
	for i := range s.layers {
		if s.layers[i].n != s.Len() {
			return fmt.Errorf("runtime: layer %d holds %d positions, layer 0 %d: finish the partial pass first", i, s.layers[i].n, s.Len())
		}
	}
	if len(tokens) > e.batch {
		// A pass of several batches takes its cache at once. Not a shorter
		// one: reserved exactly, a token-by-token caller (bench's decode,
		// a drafter) would copy the whole cache every token, where
		// attention's growCache doubles it.
		s.reserve(s.Len() + len(tokens))
	}
	h, v := e.cfg.Hidden, e.cfg.VocabSize
	bs := min(e.batch, len(tokens))
	x := grow(&s.scr.x, bs*h)
	for b0 := 0; b0 < len(tokens); b0 += bs {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch := tokens[b0:min(b0+bs, len(tokens))]
		t := len(batch)
		xb := x[:t*h]
		if err := e.Embed(batch, xb); err != nil {
			return err
		}
		if err := s.RunLayers(0, len(e.layers), xb, nil, nil); err != nil {
			return err
		}
		switch {
		case all:
			if err := s.Head(xb, logits[b0*v:(b0+t)*v]); err != nil {
				return err
			}
		case b0+t == len(tokens):
			if err := s.Head(xb[(t-1)*h:], logits[:v]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Step is one generated token and the logits it was chosen from.
type Step struct {
	Index  int       // 0 for the first generated token
	Token  int32     // argmax of Logits (lowest id on ties)
	Logits []float32 // valid only during the callback
}

// Generate decodes greedily after prompt on s (see Generate).
func (s *State) Generate(ctx context.Context, prompt []int32, n int, fn func(Step) bool) error {
	return Generate(ctx, s, prompt, n, fn)
}

// Greedy returns the n tokens greedy decoding generates after prompt on a
// fresh State. It does not stop at end-of-sequence tokens.
func (e *Engine) Greedy(ctx context.Context, prompt []int32, n int) ([]int32, error) {
	return e.NewState().Greedy(ctx, prompt, n)
}

// Greedy is Engine.Greedy on s, after the positions s holds: a caller
// decoding many prompts can Reset and reuse one State rather than hold a
// second scratch and cache until a collection.
func (s *State) Greedy(ctx context.Context, prompt []int32, n int) ([]int32, error) {
	e := s.e
	if len(prompt) == 0 {
		return nil, fmt.Errorf("runtime: empty prompt")
	}
	if s.Len()+len(prompt)+n-1 > e.ctxLen {
		return nil, fmt.Errorf("runtime: %s: prompt of %d tokens plus %d generated exceed the context length %d", e.name, s.Len()+len(prompt), n, e.ctxLen)
	}
	out := make([]int32, 0, n)
	err := s.Generate(ctx, prompt, n, func(st Step) bool {
		out = append(out, st.Token)
		return true
	})
	return out, err
}

// Logits returns the teacher-forced logits of tokens on a fresh State:
// row i is the distribution after tokens[0..i].
func (e *Engine) Logits(ctx context.Context, tokens []int32) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.NewState().ForwardAll(tokens)
}

// Argmax returns the index of the largest logit (the lowest on ties, like
// torch.argmax).
func Argmax(logits []float32) int32 { return int32(argmax(logits)) }

// Verify is one step of exact greedy speculative decoding (reference
// §7.1). The State holds the committed tokens; last is the token the
// model emitted most recently and has not yet processed; draft are the
// drafter's proposals d_1…d_K. Verify processes [last, d_1…d_K] in one
// batch, accepts the longest prefix d_1…d_a that greedy decoding would
// have produced, rolls the State back so that it holds exactly the
// committed tokens plus last, d_1…d_a, and returns a and the bonus token
// y_a (the next "last"). The emitted tokens are d_1…d_a, next — the same
// as a+1 steps of Greedy, bit for bit.
//
// On hybrid models the DeltaNet snapshots needed for the rollback are kept
// for the duration of the call. If processing fails midway the State is
// left partly advanced; roll it back with Truncate or discard it.
func (s *State) Verify(last int32, draft []int32) (accepted int, next int32, err error) {
	n := s.Len()
	if need := len(draft) + 1; s.e.cfg.Hybrid() && s.rollback < need {
		old := s.rollback
		s.SetRollback(need)
		defer s.SetRollback(old)
	}
	rows, err := s.ForwardAll(append([]int32{last}, draft...))
	if err != nil {
		return 0, -1, err
	}
	a := 0
	for a < len(draft) && draft[a] == Argmax(rows[a]) {
		a++
	}
	if err := s.Truncate(n + a + 1); err != nil {
		return 0, -1, err
	}
	return a, Argmax(rows[a]), nil
}
