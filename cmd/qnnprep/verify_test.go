package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/synth"
)

// captureStderr runs f with os.Stderr redirected and returns what it wrote.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	f()
	os.Stderr = old
	w.Close()
	return <-done
}

func needStories(t *testing.T) {
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
}

// TestGoldenVerifyCommands: record a golden from stories260K (F32), verify
// the model itself (pass), its q8_0 qmodel (JSON report; strict match
// decided by the report's own divergence), and another model (refused,
// exit 1, the mismatch named).
func TestGoldenVerifyCommands(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	prompts := writeText(t, dir, "prompts.txt", "Once upon a time\nids: 1 403 407\n# a comment\nLily went to the park\n")
	g := filepath.Join(dir, "golden.json")
	var code int
	errOut := captureStderr(t, func() {
		code = run([]string{"golden", "record", storiesGGUF, "--prompts", prompts, "-n", "32", "--top-k", "6", g})
	})
	if code != 0 {
		t.Fatalf("record: exit %d: %s", code, errOut)
	}
	f, err := golden.Read(g)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Prompts) != 3 || f.Prompts[0].Text != "Once upon a time" || f.Prompts[0].IDs[0] != 1 || len(f.Prompts[1].IDs) != 3 || len(f.Prompts[2].TopK[31]) != 6 || f.Tokenizer == "" {
		t.Fatalf("golden file: %+v", f)
	}
	// The recorded continuation of BOS is the fixture's (llama2.c run.c).
	ids, _ := os.ReadFile(filepath.Join(filepath.Dir(storiesGGUF), "greedy_ids_from_bos_first64.txt"))
	if err := os.WriteFile(prompts, []byte("ids: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g1 := filepath.Join(dir, "bos.json")
	captureStderr(t, func() { code = run([]string{"golden", "record", storiesGGUF, "--prompts", prompts, "-n", "40", g1}) })
	if code != 0 {
		t.Fatalf("record: exit %d", code)
	}
	fb, _ := golden.Read(g1)
	want := strings.Fields(string(ids))
	for i, id := range fb.Prompts[0].Expected {
		if want[i] != itoa(id) {
			t.Fatalf("token %d: recorded %d, fixture %s", i, id, want[i])
		}
	}

	out := captureStdout(t, func() {
		code = run([]string{"verify", storiesGGUF, "--golden", g, "--min-match", "1", "--min-top1", "1", "--min-cosine", "0.9999", "--fail-on-degeneration"})
	})
	if code != 0 || !strings.Contains(out, "PASS") {
		t.Fatalf("verify self: exit %d\n%s", code, out)
	}

	q8 := filepath.Join(dir, "q8.gguf")
	runOK(t, "quantize", storiesGGUF, q8, "--recipe", "q8_0")
	report := filepath.Join(dir, "report.json")
	out = captureStdout(t, func() {
		code = run([]string{"verify", q8, "--golden", g, "--json", "--report", report, "--min-cosine", "0.99"})
	})
	var r golden.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != 0 || !r.Pass || r.Decoder != "whole" || len(r.Prompts) != 3 || *r.Summary.Cosine < 0.99 {
		t.Fatalf("verify q8_0: exit %d, %+v", code, r)
	}
	if b, _ := os.ReadFile(report); string(b) != out {
		t.Fatalf("--report differs from --json output")
	}
	// Speculatively, with the F32 source drafting for its q8_0 qmodel: two
	// reports, the second with acceptance statistics and the same tokens.
	out = captureStdout(t, func() {
		code = run([]string{"verify", q8, "--golden", g, "--json", "--draft", storiesGGUF, "-k", "3"})
	})
	var rs []golden.Report
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != 0 || len(rs) != 2 || rs[1].Speculative == nil || rs[1].Speculative.Windows == 0 || !rs[1].Pass {
		t.Fatalf("verify --draft: exit %d, %s", code, out)
	}
	for i := range rs[0].Prompts {
		if itoa(int32(len(rs[0].Prompts[i].Got))) != itoa(int32(len(rs[1].Prompts[i].Got))) || rs[0].Prompts[i].Match != rs[1].Prompts[i].Match {
			t.Fatalf("speculative and whole reports differ on prompt %d", i)
		}
	}
	exact := r.Summary.ExactPrompts == r.Summary.Prompts
	captureStdout(t, func() { code = run([]string{"verify", q8, "--golden", g, "--min-match", "1"}) })
	if (code == 0) != exact {
		t.Fatalf("--min-match 1: exit %d, but the report says exact=%v", code, exact)
	}

	// Another model: a qmodel whose recorded source fingerprint differs.
	other := filepath.Join(dir, "other.gguf")
	writeOtherModel(t, q8, other)
	errOut = captureStderr(t, func() {
		captureStdout(t, func() { code = run([]string{"verify", other, "--golden", g}) })
	})
	if code != 1 || !strings.Contains(errOut, "does not match the golden file") || !strings.Contains(errOut, f.Model.SHA256[:16]) {
		t.Fatalf("mismatched model: exit %d: %s", code, errOut)
	}
	errOut = captureStderr(t, func() { code = run([]string{"verify", q8, "--golden", g, "--min-match", "2"}) })
	if code != 2 || !strings.Contains(errOut, "--min-match 2: want a fraction in [0, 1]") {
		t.Fatalf("--min-match 2: exit %d: %s", code, errOut)
	}
	// --plan: the plan must describe the artifact's model.
	plan := filepath.Join(dir, "plan.json")
	runOK(t, "plan", storiesGGUF, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", plan)
	out = captureStdout(t, func() {
		code = run([]string{"verify", q8, "--golden", g, "--plan", plan, "--draft", storiesGGUF, "-k", "2", "--json"})
	})
	rs = nil
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != 0 || len(rs) != 4 || !strings.HasPrefix(rs[1].Decoder, "plan ") || rs[3].Speculative == nil || !strings.Contains(rs[3].Decoder, "speculative") {
		t.Fatalf("verify --plan --draft: exit %d, %s", code, out)
	}
	for _, r := range rs[1:] {
		if !r.Pass || len(r.Failures) != 0 {
			t.Fatalf("%s: %v", r.Decoder, r.Failures)
		}
	}
}

// writeOtherModel copies a GGUF with a different qnnprep.source.sha256.
func writeOtherModel(t *testing.T, in, out string) {
	f, err := gguf.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &gguf.Writer{Metadata: append(gguf.Metadata(nil), f.Metadata...)}
	w.Metadata.Set("qnnprep.source.sha256", strings.Repeat("ab", 32))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: gguf.Bytes(data)})
	}
	if err := gguf.WriteFile(out, w); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenLongPrompt: a 512-token prompt from --prompt-file records and
// verifies (the context raised with --ctx). (The golden and runtime
// packages test 2048-token prompts on faster models.)
func TestGoldenLongPrompt(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("ids: 1")
	for i := 1; i < 512; i++ {
		b.WriteString(" " + itoa(int32(3+(i*7919)%500)))
	}
	pf := writeText(t, dir, "long.txt", b.String()+"\n")
	g := filepath.Join(dir, "g.json")
	var code int
	captureStderr(t, func() {
		code = run([]string{"golden", "record", storiesGGUF, "--prompt-file", pf, "--ctx", "600", "-n", "16", g})
	})
	if code != 0 {
		t.Fatalf("record: exit %d", code)
	}
	f, _ := golden.Read(g)
	if len(f.Prompts) != 1 || len(f.Prompts[0].IDs) != 512 {
		t.Fatalf("long prompt recorded as %d prompts", len(f.Prompts))
	}
	out := captureStdout(t, func() {
		code = run([]string{"verify", storiesGGUF, "--golden", g, "--ctx", "600", "--min-match", "1"})
	})
	if code != 0 {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	// Without --ctx the model's 128 positions cannot hold it.
	errOut := captureStderr(t, func() {
		code = run([]string{"golden", "record", storiesGGUF, "--prompt-file", pf, "-n", "16", filepath.Join(dir, "x.json")})
	})
	if code != 1 || !strings.Contains(errOut, "context length") {
		t.Fatalf("over-long prompt: exit %d: %s", code, errOut)
	}
}

// TestSpeculateCommand: stories260K drafting for itself accepts every
// proposal; a random EAGLE-3 head written as GGUF drafts too; both equal
// greedy decoding.
func TestSpeculateCommand(t *testing.T) {
	needStories(t)
	var code int
	out := captureStdout(t, func() {
		code = run([]string{"speculate", storiesGGUF, "--draft", storiesGGUF, "-k", "3", "--ids", "1", "-n", "40", "--json"})
	})
	var r runtime.Comparison
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != 0 || !r.EqualsGreedy || r.Stats.Accepted != r.Stats.Proposed || r.AcceptanceLength < 2.5 || r.TargetCallsPerToken > 0.3 {
		t.Fatalf("self draft: exit %d, %+v", code, r)
	}
	head := filepath.Join(t.TempDir(), "eagle3.gguf")
	writeRandomEagle3(t, head)
	out = captureStdout(t, func() {
		code = run([]string{"speculate", storiesGGUF, "--eagle3", head, "-k", "2", "--prompt", "Once upon a time", "-n", "40", "--json"})
	})
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != 0 || !r.EqualsGreedy || r.Stats.Windows == 0 {
		t.Fatalf("eagle3: exit %d, %+v", code, r)
	}
	// Through a two-stage plan.
	plan := filepath.Join(t.TempDir(), "plan.json")
	captureStdout(t, func() {
		code = run([]string{"plan", storiesGGUF, "--stages", "2", "--ar", "8,1", "--cl", "128", "-o", plan})
	})
	out = captureStdout(t, func() {
		code = run([]string{"speculate", storiesGGUF, "--draft", storiesGGUF, "--plan", plan, "-k", "3", "--ids", "1", "-n", "40", "--json"})
	})
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != 0 || !r.EqualsGreedy || r.Plan != plan || r.Stats.Accepted != r.Stats.Proposed {
		t.Fatalf("staged: exit %d, %+v", code, r)
	}
	errOut := captureStderr(t, func() { code = run([]string{"speculate", storiesGGUF, "--mtp", "--ids", "1"}) })
	if code != 1 || !strings.Contains(errOut, "has no MTP head") {
		t.Fatalf("--mtp on llama: exit %d: %s", code, errOut)
	}
	if code = run([]string{"speculate", storiesGGUF, "--ids", "1"}); code != 2 {
		t.Fatalf("no drafter: exit %d", code)
	}
}

// writeRandomEagle3 writes an EAGLE-3 head for stories260K with random
// F32 weights and 100 draft tokens.
func writeRandomEagle3(t *testing.T, path string) {
	t.Helper()
	m, err := model.Open(storiesGGUF)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := synth.WriteEagle3(path, m.Config, 100, 1); err != nil {
		t.Fatal(err)
	}
}

func itoa(v int32) string {
	b, _ := json.Marshal(v)
	return string(b)
}
