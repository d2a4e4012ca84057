package runtime

import (
	"context"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/synth"
)

// TestDecodeStepAllocs: once its cache is reserved, a decode step (one
// token through every layer and the head) allocates nothing, on one
// thread and split over two (every product, attention and DeltaNet step
// handed to the helper), for every architecture.
func TestDecodeStepAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: sync.Pool drops items, so pooled scratch allocates")
	}
	for _, arch := range archs {
		for _, typ := range []gguf.Type{gguf.F32, gguf.Q8_0} {
			m := tinyModel(t, synth.Config(arch, false), typ, 1)
			for _, threads := range []int{1, 2} {
				e := newEngine(t, m, Options{Threads: threads})
				e.minWork = 0
				s := e.NewState()
				prompt := randomTokens(5, e.cfg.VocabSize, 3)
				s.reserve(len(prompt) + 40)
				logits := make([]float32, e.cfg.VocabSize)
				if err := s.forward(context.Background(), prompt, logits, false); err != nil {
					t.Fatal(err)
				}
				one := []int32{prompt[0]}
				step := func() {
					if err := s.forward(context.Background(), one, logits, false); err != nil {
						t.Fatal(err)
					}
				}
				step() // first decode step: scratch sized for one token
				if n := testing.AllocsPerRun(20, step); n != 0 {
					t.Errorf("%s/%s/%d threads: %v allocations per decode step", arch, typ, threads, n)
				}
			}
		}
	}
}
