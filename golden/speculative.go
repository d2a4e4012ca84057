package golden

import (
	"context"

	"github.com/qnnprep/qnnprep/runtime"
)

// Speculator decodes speculatively: runtime.Engine (whole model) or a
// staged executor.
type Speculator interface {
	Speculate(ctx context.Context, d runtime.Drafter, prompt []int32, n, k int) ([]int32, runtime.SpecStats, error)
}

// SpecDecoder is a Decoder whose free-running decode is speculative (a
// fresh drafter per prompt, K tokens per window); its teacher-forced
// logits come from another Decoder. Verify reports its acceptance
// statistics.
type SpecDecoder struct {
	sp         Speculator
	tf         Decoder
	newDrafter func() (runtime.Drafter, error)
	k          int
	stats      runtime.SpecStats
}

// SpeculativeDecoder returns a SpecDecoder over the whole model e.
func SpeculativeDecoder(e *runtime.Engine, newDrafter func() (runtime.Drafter, error), k int) *SpecDecoder {
	return SpeculativeThrough(e, EngineDecoder(e), newDrafter, k)
}

// SpeculativeThrough returns a SpecDecoder decoding with sp and taking
// teacher-forced logits from tf.
func SpeculativeThrough(sp Speculator, tf Decoder, newDrafter func() (runtime.Drafter, error), k int) *SpecDecoder {
	return &SpecDecoder{sp: sp, tf: tf, newDrafter: newDrafter, k: k}
}

// TeacherForced is tf's.
func (d *SpecDecoder) TeacherForced(ctx context.Context, prompt, cont []int32) ([][]float32, error) {
	return d.tf.TeacherForced(ctx, prompt, cont)
}

// Greedy decodes n tokens speculatively; they must equal greedy decoding's.
func (d *SpecDecoder) Greedy(ctx context.Context, prompt []int32, n int) ([]int32, error) {
	dr, err := d.newDrafter()
	if err != nil {
		return nil, err
	}
	out, st, err := d.sp.Speculate(ctx, dr, prompt, n, d.k)
	if err != nil {
		return nil, err
	}
	s := &d.stats
	s.Tokens += st.Tokens
	s.Windows += st.Windows
	s.TargetCalls += st.TargetCalls
	s.Proposed += st.Proposed
	s.Accepted += st.Accepted
	s.Seconds += st.Seconds
	s.PromptSeconds += st.PromptSeconds
	return out, nil
}

// Stats returns the statistics summed over every Greedy call so far.
func (d *SpecDecoder) Stats() runtime.SpecStats { return d.stats }

// SpecReport summarises speculative decoding in a Report.
type SpecReport struct {
	K                   int     `json:"k"`
	Windows             int     `json:"windows"`
	Proposed            int     `json:"proposed"`
	Accepted            int     `json:"accepted"`
	AcceptanceLength    float64 `json:"acceptance_length"` // mean draft tokens accepted per window
	TokensPerWindow     float64 `json:"tokens_per_window"`
	TargetCallsPerToken float64 `json:"target_calls_per_token"`
}

func (d *SpecDecoder) report() *SpecReport {
	s := d.stats
	return &SpecReport{K: d.k, Windows: s.Windows, Proposed: s.Proposed, Accepted: s.Accepted,
		AcceptanceLength: s.AcceptanceLength(), TokensPerWindow: s.TokensPerWindow(), TargetCallsPerToken: s.TargetCallsPerToken()}
}
