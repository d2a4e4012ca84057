package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// copyGGUF copies a GGUF file through edit, which may change the metadata
// and a tensor's bytes.
func copyGGUF(t *testing.T, in, out string, md func(gguf.Metadata) gguf.Metadata, data func(ti *gguf.TensorInfo, b []byte) []byte) {
	t.Helper()
	f, err := gguf.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &gguf.Writer{Metadata: md(append(gguf.Metadata(nil), f.Metadata...))}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		b, err := f.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		b = data(ti, append([]byte(nil), b...))
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: gguf.Bytes(b)})
	}
	if err := gguf.WriteFile(out, w); err != nil {
		t.Fatal(err)
	}
}

func sameMetadata(md gguf.Metadata) gguf.Metadata  { return md }
func sameData(_ *gguf.TensorInfo, b []byte) []byte { return b }

// withoutQnnprep drops qnnprep's keys: the file llama.cpp makes from the
// same weights (its Q8_0 is byte for byte the q8_0 recipe's).
func withoutQnnprep(md gguf.Metadata) gguf.Metadata {
	var out gguf.Metadata
	for _, kv := range md {
		if !strings.HasPrefix(kv.Key, "qnnprep.") {
			out = append(out, kv)
		}
	}
	return out
}

// reverseRows reverses the rows of one tensor: a qmodel broken after
// quantization that still claims its source.
func reverseRows(name string) func(ti *gguf.TensorInfo, b []byte) []byte {
	return func(ti *gguf.TensorInfo, b []byte) []byte {
		if ti.Name != name {
			return b
		}
		rb, _ := ti.Type.RowBytes(ti.Dims[0])
		n := len(b) / int(rb)
		out := make([]byte, len(b))
		for r := 0; r < n; r++ {
			copy(out[r*int(rb):], b[(n-1-r)*int(rb):(n-r)*int(rb)])
		}
		return out
	}
}

func verifyJSON(t *testing.T, args ...string) (int, *golden.Report, string) {
	t.Helper()
	var code int
	var out string
	errOut := captureStderr(t, func() { out = captureStdout(t, func() { code = run(append([]string{"verify", "--json"}, args...)) }) })
	if code > 1 {
		t.Fatalf("verify %v: exit %d: %s", args, code, errOut)
	}
	if code == 1 && out == "" {
		return code, nil, errOut
	}
	var r golden.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("verify %v: %v: %s %s", args, err, out, errOut)
	}
	return code, &r, errOut
}

// TestVerdicts: verify's default thresholds pass correct qmodels and fail
// broken ones, and the golden guard accepts derived artifacts, refuses
// anything else with both fingerprints named unless --source-fingerprint
// vouches for a file made elsewhere (shown in the report); compare and
// sparsify --golden apply the same rule; --kv-f16 is recorded and a
// mismatch warned about.
func TestVerdicts(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	prompts := writeText(t, dir, "prompts.txt", "Once upon a time\nids: 1 403 407\nLily went to the park\n")
	g, gkv := filepath.Join(dir, "golden.json"), filepath.Join(dir, "golden-kv.json")
	var code int
	for _, args := range [][]string{
		{"golden", "record", storiesGGUF, "--prompts", prompts, "-n", "32", g},
		{"golden", "record", storiesGGUF, "--prompts", prompts, "-n", "32", "--kv-f16", gkv},
	} {
		if errOut := captureStderr(t, func() { code = run(args) }); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
	}
	f, _ := golden.Read(g)
	fkv, _ := golden.Read(gkv)
	if f.Settings.KVF16 || !fkv.Settings.KVF16 {
		t.Fatalf("kv_f16 recorded as %v and %v", f.Settings.KVF16, fkv.Settings.KVF16)
	}
	sha := f.Model.SHA256

	// Correct qmodels pass the defaults, which the report prints.
	for _, recipe := range []string{"int8", "q8_0"} {
		q := filepath.Join(dir, recipe+".gguf")
		if captureStdout(t, func() { code = run([]string{"quantize", storiesGGUF, q, "--recipe", recipe}) }); code != 0 {
			t.Fatalf("quantize %s: exit %d", recipe, code)
		}
		code, r, _ := verifyJSON(t, q, "--golden", g)
		if code != 0 || !r.Pass || r.Criteria.MinTop1 == 0 || r.Criteria.MinCosine == 0 || !strings.Contains(r.Criteria.Basis, "recipe "+recipe) ||
			r.Source == nil || r.Source.Rule != golden.RuleDerived {
			t.Fatalf("%s with default thresholds: exit %d, %+v", recipe, code, r)
		}
		var out string
		captureStderr(t, func() { out = captureStdout(t, func() { code = run([]string{"verify", q, "--golden", g}) }) })
		if code != 0 || !strings.Contains(out, "thresholds: min-match") || !strings.Contains(out, "default for recipe "+recipe) {
			t.Fatalf("table: %s", out)
		}
	}
	q8 := filepath.Join(dir, "q8_0.gguf")

	// A qmodel with one matrix's rows reversed fails the defaults, naming
	// the threshold.
	broken := filepath.Join(dir, "broken.gguf")
	copyGGUF(t, filepath.Join(dir, "int8.gguf"), broken, sameMetadata, reverseRows("blk.0.ffn_down.weight"))
	code, r, _ := verifyJSON(t, broken, "--golden", g)
	if code != 1 || r == nil || r.Pass || !strings.Contains(strings.Join(r.Failures, "\n"), "below min-") {
		t.Fatalf("broken qmodel: exit %d, %+v", code, r)
	}
	// Explicit thresholds replace the defaults, and the report says so.
	code, r, _ = verifyJSON(t, broken, "--golden", g, "--min-match", "0", "--min-top1", "0", "--min-cosine", "0", "--fail-on-degeneration=false")
	if code != 0 || !strings.Contains(r.Criteria.Basis, "min-match, min-top1, min-cosine, fail-on-degeneration given") {
		t.Fatalf("overridden thresholds: exit %d, %+v", code, r)
	}

	// llama.cpp's Q8_0 of the source: refused without the override, with
	// both fingerprints and the flag named; accepted with it, shown.
	elsewhere := filepath.Join(dir, "elsewhere.gguf")
	copyGGUF(t, q8, elsewhere, withoutQnnprep, sameData)
	em, err := model.Open(elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := f.Accept(em, sha)
	em.Close()
	code, _, errOut := verifyJSON(t, elsewhere, "--golden", g)
	if code != 1 || !strings.Contains(errOut, sha) || !strings.Contains(errOut, acc.Artifact) || !strings.Contains(errOut, "--source-fingerprint") {
		t.Fatalf("made elsewhere, no override: exit %d: %s", code, errOut)
	}
	code, r, _ = verifyJSON(t, elsewhere, "--golden", g, "--source-fingerprint", sha)
	if code != 0 || r.Source.Rule != golden.RuleOverride || r.Source.Override != sha || !strings.Contains(r.Criteria.Basis, "Q8_0 model made elsewhere") {
		t.Fatalf("made elsewhere, override: exit %d, %+v", code, r)
	}

	// An unrelated model (same vocabulary size): refused; forced through
	// with the override, it fails the defaults.
	other := filepath.Join(dir, "other.gguf")
	if err := synth.WriteGGUF(other, synth.Config(model.Llama, false), 3, gguf.F32); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut = verifyJSON(t, other, "--golden", g); code != 1 || !strings.Contains(errOut, sha) {
		t.Fatalf("unrelated: exit %d: %s", code, errOut)
	}
	if code, r, _ = verifyJSON(t, other, "--golden", g, "--source-fingerprint", sha); code != 1 || r == nil || r.Pass {
		t.Fatalf("unrelated with override: exit %d, %+v", code, r)
	}
	// compare and sparsify --golden: the same rule.
	var out string
	errOut = captureStderr(t, func() { captureStdout(t, func() { code = run([]string{"compare", q8, other, "--golden", g}) }) })
	if code == 0 || !strings.Contains(errOut, sha) {
		t.Fatalf("compare with an unrelated model: exit %d: %s", code, errOut)
	}
	captureStderr(t, func() {
		out = captureStdout(t, func() { code = run([]string{"compare", q8, elsewhere, "--golden", g, "--source-fingerprint", sha}) })
	})
	if code != 0 || !strings.Contains(out, "elsewhere.gguf: golden accepted by "+golden.RuleOverride) {
		t.Fatalf("compare --source-fingerprint: exit %d: %s", code, out)
	}
	sp := filepath.Join(dir, "sp.gguf")
	errOut = captureStderr(t, func() {
		captureStdout(t, func() { code = run([]string{"sparsify", other, sp, "--pattern", "2:4", "--golden", g, "-t", "1"}) })
	})
	if code == 0 || !strings.Contains(errOut, sha) {
		t.Fatalf("sparsify --golden of an unrelated model: exit %d: %s", code, errOut)
	}
	captureStderr(t, func() {
		out = captureStdout(t, func() {
			code = run([]string{"sparsify", elsewhere, sp, "--pattern", "2:4", "--golden", g, "--source-fingerprint", sha, "-t", "1"})
		})
	})
	if code != 0 || !strings.Contains(out, "golden accepted by "+golden.RuleOverride) {
		t.Fatalf("sparsify --source-fingerprint: exit %d: %s", code, out)
	}

	// --kv-f16: the source against its --kv-f16 golden is exact with the
	// flag; without it, verify warns.
	code, r, errOut = verifyJSON(t, storiesGGUF, "--golden", gkv, "--kv-f16")
	if code != 0 || len(r.Warnings) != 0 || r.Source.Rule != golden.RuleSameModel || r.Criteria.MinMatch != 1 {
		t.Fatalf("--kv-f16 against a --kv-f16 golden: exit %d, %+v %s", code, r, errOut)
	}
	_, r, errOut = verifyJSON(t, storiesGGUF, "--golden", gkv)
	if len(r.Warnings) != 1 || !strings.Contains(errOut, "warning: golden") || !strings.Contains(errOut, "--kv-f16") {
		t.Fatalf("no --kv-f16 against a --kv-f16 golden: %+v %s", r.Warnings, errOut)
	}

	// A golden whose prompts do not fit the context is rejected, naming the
	// file and the prompt.
	errOut = captureStderr(t, func() { captureStdout(t, func() { code = run([]string{"verify", q8, "--golden", g, "--ctx", "20"}) }) })
	if code == 0 || !strings.Contains(errOut, g) || !strings.Contains(errOut, "prompt 0") {
		t.Fatalf("prompts longer than the context: exit %d: %s", code, errOut)
	}
}
