package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// SIGINT in the middle of a quantize leaves neither the output nor its
// temporary file.
func TestQuantizeInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 450 MB model")
	}
	dir := t.TempDir()
	src := writeBigLlama(t, dir, 4)
	out := filepath.Join(dir, "out.gguf")
	args, _ := json.Marshal([]string{"quantize", src, out, "--recipe", "q1"})
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperQnnprep$")
	cmd.Env = append(os.Environ(), "QNNPREP_HELPER_ARGS="+string(args))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the output's temporary file exists: quantize is writing.
	deadline := time.Now().Add(60 * time.Second)
	for !hasTemp(dir) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("quantize never started writing; stderr:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d (%v), want 130 (interrupted); stderr:\n%s", code, err, stderr.String())
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "src.gguf" {
			t.Errorf("interrupted quantize left %s", e.Name())
		}
	}
}

func hasTemp(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if atomicfile.IsTemp(e.Name()) {
			return true
		}
	}
	return false
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
