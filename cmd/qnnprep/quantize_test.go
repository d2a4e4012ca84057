package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// SIGINT in the middle of a quantize stops it within a second with exit
// 130 and "interrupted", leaving neither the output nor its temporary file.
func TestQuantizeInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 450 MB model")
	}
	dir := t.TempDir()
	src := writeBigLlama(t, dir, 4)
	out := filepath.Join(dir, "out.gguf")
	// Interrupted once the output's temporary file has data: mid-tensor.
	r := interruptWhen(t, []string{"quantize", src, out, "--recipe", "q1"}, func() bool { return findTemp(dir, "out.gguf") })
	r.check(t, "quantize")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "src.gguf" && e.Name() != atomicfile.MarkerName {
			t.Errorf("interrupted quantize left %s", e.Name())
		}
	}
	// The marker lists the source writeBigLlama wrote, not the output.
	if b, err := os.ReadFile(filepath.Join(dir, atomicfile.MarkerName)); err != nil || strings.Contains(string(b), "out.gguf") {
		t.Errorf("marker after an interrupted quantize: %q, %v", b, err)
	}
}

// writeBigLlama writes dir/src.gguf, an F32 synthetic llama (hidden 1024,
// vocab 32000) large enough that quantize and export take long enough to
// be interrupted mid-tensor.
func writeBigLlama(t *testing.T, dir string, layers int) string {
	t.Helper()
	src := filepath.Join(dir, "src.gguf")
	cfg := synth.Config(model.Llama, true)
	cfg.Hidden, cfg.FFN, cfg.Layers, cfg.VocabSize = 1024, 2816, layers, 32000
	cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.RopeDim = 8, 8, 128, 128
	cfg.LayerKinds = make([]model.LayerKind, cfg.Layers)
	if err := synth.WriteGGUF(src, cfg, 1, gguf.F32); err != nil {
		t.Fatal(err)
	}
	return src
}
