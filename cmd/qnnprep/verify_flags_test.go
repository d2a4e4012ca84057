package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/synth"
)

// TestVerifyThresholds: --min-top1 and --min-cosine turn a report that
// passes into a failure once they ask more than the qmodel reaches. (q1 of
// an ordinary F32 model, not trained for 1-bit weights: its own defaults
// fail it, so the passing run lowers them.)
func TestVerifyThresholds(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "llama.gguf")
	if err := synth.WriteGGUF(src, synth.Config(model.Llama, true), 3, gguf.F32); err != nil {
		t.Fatal(err)
	}
	prompts := writeText(t, dir, "prompts.txt", "ids: 1 3 5 7\nids: 2 4 6\nids: 9 8\n")
	g, q1 := filepath.Join(dir, "g.json"), filepath.Join(dir, "q1.gguf")
	runOK(t, "golden", "record", src, "--prompts", prompts, "-n", "24", g)
	runOK(t, "quantize", src, q1, "--recipe", "q1")
	var r golden.Report
	low := []string{"--min-top1", "0", "--min-cosine", "0", "--fail-on-degeneration=false"}
	if err := json.Unmarshal([]byte(runOK(t, append([]string{"verify", q1, "--golden", g, "--json"}, low...)...)), &r); err != nil {
		t.Fatal(err)
	}
	if r.Summary.Top1 >= 1 || *r.Summary.Cosine >= 1 {
		t.Fatalf("the q1 qmodel agrees exactly with its source: %+v", r.Summary)
	}
	for _, args := range [][]string{
		{"--min-top1", "1", "--min-cosine", "0", "--fail-on-degeneration=false"},
		{"--min-cosine", "1", "--min-top1", "0", "--fail-on-degeneration=false"},
	} {
		var code int
		captureStdout(t, func() { code = run(append([]string{"verify", q1, "--golden", g}, args...)) })
		if code != 1 {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
	}
}

// TestVerifyFailOnDegeneration: a decode that loops where the golden does
// not fails with --fail-on-degeneration and only then. The looping model
// is the source with its output norm zeroed (all logits 0, so greedy
// repeats token 0), carrying the source's fingerprint like a qmodel.
func TestVerifyFailOnDegeneration(t *testing.T) {
	src := synthLlamaGGUF(t)
	dir := t.TempDir()
	prompts := writeText(t, dir, "prompts.txt", "ids: 1 3 5 7\n")
	g := filepath.Join(dir, "g.json")
	runOK(t, "golden", "record", src, "--prompts", prompts, "-n", "40", g)
	gf, err := golden.Read(g)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &gguf.Writer{Metadata: append(gguf.Metadata(nil), f.Metadata...)}
	w.Metadata.Set(quantize.KeySourceSHA256, gf.Model.SHA256)
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		if ti.Name == "output_norm.weight" {
			data = make([]byte, len(data))
		}
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: gguf.Bytes(data)})
	}
	looping := filepath.Join(dir, "looping.gguf")
	if err := gguf.WriteFile(looping, w); err != nil {
		t.Fatal(err)
	}
	var code int
	// The other thresholds off: only degeneration can fail.
	low := []string{"verify", looping, "--golden", g, "--min-top1", "0", "--min-cosine", "0"}
	out := captureStdout(t, func() { code = run(append(low, "--fail-on-degeneration=false")) })
	if code != 0 {
		t.Fatalf("--fail-on-degeneration=false: exit %d\n%s", code, out)
	}
	out = captureStdout(t, func() { code = run(append(low, "--fail-on-degeneration")) })
	if code != 1 {
		t.Errorf("--fail-on-degeneration on a looping decode: exit %d\n%s", code, out)
	}
}
