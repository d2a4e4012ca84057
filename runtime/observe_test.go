package runtime

import (
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

func TestObserve(t *testing.T) {
	m := tinyModel(t, synth.Config(model.Qwen35, false), gguf.F32, 3)
	e := newEngine(t, m, Options{})
	type call struct {
		rows, cols int
		sum        float32
	}
	seen := map[string][]call{}
	stop := e.Observe(func(name string, x []float32, rows, cols int) {
		if len(x) != rows*cols {
			t.Errorf("%s: %d values for %d×%d", name, len(x), rows, cols)
		}
		var s float32
		for _, v := range x {
			s += v
		}
		seen[name] = append(seen[name], call{rows, cols, s})
	})
	tokens := randomTokens(5, m.Config.VocabSize, 1)
	want, err := e.Logits(t.Context(), tokens)
	if err != nil {
		t.Fatal(err)
	}
	// Every matrix the forward pass multiplies by is observed once per
	// batch with all 5 tokens; the tied head shows up as token_embd.
	for _, tn := range m.Tensors {
		if len(tn.Dims) != 2 || strings.HasSuffix(tn.Name, "ssm_conv1d.weight") {
			continue
		}
		c := seen[tn.Name]
		if len(c) != 1 || c[0].rows != 5 || c[0].cols != int(tn.Dims[0]) {
			t.Errorf("%s: observed %+v, want one call of 5×%d", tn.Name, c, tn.Dims[0])
		}
	}
	stop()
	stop() // idempotent
	clear(seen)
	got, err := e.Logits(t.Context(), tokens)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Errorf("observed %d tensors after stop", len(seen))
	}
	for i := range got {
		if err := sameBits(got[i], want[i]); err != nil {
			t.Fatalf("observing changed the logits: row %d: %v", i, err)
		}
	}
}
