package runtime

import "context"

// Decoder is a sequence that greedy decoding extends: the whole model's
// State or the staged executor (Staged), which runs the plan's stages.
// Forward processes tokens after those already processed and returns the
// logits after the last of them.
type Decoder interface {
	Forward(tokens []int32) ([]float32, error)
}

var (
	_ Decoder = (*State)(nil)
	_ Decoder = (*Staged)(nil)
)

// Generate decodes greedily after prompt: it processes prompt on d, then
// repeatedly takes the argmax and feeds it back, calling fn with each
// step. It stops after n tokens, when fn returns false, or when ctx is
// done. The last generated token is not processed (d then holds the
// prompt and all generated tokens but the last).
func Generate(ctx context.Context, d Decoder, prompt []int32, n int, fn func(Step) bool) error {
	if n <= 0 {
		return nil
	}
	forward := d.Forward
	var one []int32 // the token fed back, reused on a State
	if s, ok := d.(*State); ok {
		s.reserve(s.Len() + len(prompt) + n - 1)
		// A step's logits are valid only during fn, and a State keeps no
		// reference to the tokens it processes: one buffer of each serves
		// every step, so that decoding leaves no garbage per token.
		buf := make([]float32, s.e.cfg.VocabSize)
		forward = func(tokens []int32) ([]float32, error) {
			return buf, s.forward(context.Background(), tokens, buf, false)
		}
		one = make([]int32, 1)
	}
	logits, err := forward(prompt)
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		tok := Argmax(logits)
		if fn != nil && !fn(Step{Index: i, Token: tok, Logits: logits}) {
			return nil
		}
		if i+1 == n {
			return nil
		}
		next := one
		if next == nil {
			next = []int32{tok}
		}
		next[0] = tok
		if logits, err = forward(next); err != nil {
			return err
		}
	}
}
