package runtime

import (
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// TestQ2RowsBatched is TestBatchedEqualsPerToken for Q2_0 weights whose
// rows are whole steps of quant1bit's AVX-512 rows kernel (512 columns,
// eight blocks; synth's 1-bit widths are 256 and 384, which take the
// per-row kernel): decoding (one token), short batches and prompts of
// 2-13 tokens, split over threads in row ranges that are not whole
// blocks of anything, give the same bits as single-token steps.
func TestQ2RowsBatched(t *testing.T) {
	cfg := synth.Config(model.Qwen3, true)
	cfg.Hidden, cfg.FFN = 512, 1024
	m := tinyModel(t, cfg, gguf.Q2_0, 7)
	toks := randomTokens(13, cfg.VocabSize, 3)
	want := stepByStep(t, newEngine(t, m, Options{Threads: 1, Batch: 1}).NewState(), toks)
	for _, opt := range []Options{{Threads: 2, Batch: 32}, {Threads: 3, Batch: 5}, {Threads: 1, Batch: 2}, {Threads: 2, Batch: 3}} {
		e := newEngine(t, m, opt)
		e.minWork = 0 // split every product
		got, err := e.NewState().ForwardAll(toks)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if err := sameBits(got[i], want[i]); err != nil {
				t.Fatalf("%+v: token %d: %v", opt, i, err)
			}
		}
	}
}
