package peers_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit"
)

// TestLlamaBenchSynthetic runs the real llama-bench on a small synthetic
// llama GGUF.
func TestLlamaBenchSynthetic(t *testing.T) {
	testkit.Need(t, peers.LlamaBenchBin)
	p := filepath.Join(t.TempDir(), "llama-Q8_0.gguf")
	cfg := synth.Config(model.Llama, false)
	cfg.ContextLength = 512
	if err := synth.WriteGGUF(p, cfg, 7, gguf.Q8_0); err != nil {
		t.Fatal(err)
	}
	r, err := peers.RunLlamaBench(p, peers.LlamaBenchArgs{Threads: 1, Prompt: 16, Gen: 4, Depth: 16, Reps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.PPSeconds) != 2 || len(r.TGSeconds) != 2 {
		t.Fatalf("got %d pp and %d tg timings, want 2 each", len(r.PPSeconds), len(r.TGSeconds))
	}
	for _, s := range append(r.PPSeconds, r.TGSeconds...) {
		if !(s > 0 && s < 10) {
			t.Errorf("timing %v s out of range", s)
		}
	}
	if r.PeakRSS <= 0 {
		t.Errorf("peak RSS %d", r.PeakRSS)
	}
	// node-llama-cpp's prebuilt libraries are ggml's dynamic CPU
	// backends, one per CPU family: the log names the one loaded.
	if !strings.HasPrefix(r.Backend, "CPU ") || r.CPU == "" {
		t.Errorf("backend %q, CPU %q: want the CPU backend's variant and the CPU's name", r.Backend, r.CPU)
	}
	t.Logf("pp16 %.5f s, tg4 %.5f s, rss %d, backend %s on %s", r.PPSeconds[0], r.TGSeconds[0], r.PeakRSS, r.Backend, r.CPU)
}
