package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/stretchr/testify/require"
)

// runOK runs args with stdout captured and fails the test on a non-zero
// exit; it returns stdout.
func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var code int
	out := captureStdout(t, func() { code = run(args) })
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s", args, code, out)
	}
	return out
}

// writeText writes text to dir/name and returns the path.
func writeText(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// tensorType returns the ggml type name of tensor name in the model at path.
func tensorType(t *testing.T, path, name string) string {
	t.Helper()
	m, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, tn := range m.Tensors {
		if tn.Name == name {
			return tn.Type.String()
		}
	}
	t.Fatalf("%s: no tensor %s", path, name)
	return ""
}

// TestConvertVocab: --vocab embeds a vocabulary into the GGUF of a
// checkpoint that has none.
func TestConvertVocab(t *testing.T) {
	dir := t.TempDir()
	for _, withVocab := range []bool{false, true} {
		out := filepath.Join(dir, "out.gguf")
		args := []string{"convert", "-q", fixture(t, "stories260K/hf"), out}
		if withVocab {
			args = append(args, "--vocab", fixture(t, "stories260K/tok512.bin"))
		}
		runOK(t, args...)
		m, err := model.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		tokens, _ := m.Metadata.Strings("tokenizer.ggml.tokens")
		m.Close()
		if (len(tokens) == 512) != withVocab {
			t.Errorf("--vocab given %v: %d tokens in the GGUF", withVocab, len(tokens))
		}
	}
}

// TestQuantizeOverride: --override gives matching tensors another type
// than the recipe's, in quantize and in build's qmodel.
func TestQuantizeOverride(t *testing.T) {
	src := synthLlamaGGUF(t)
	const name = "blk.0.attn_q.weight"
	dir := t.TempDir()
	plain, over := filepath.Join(dir, "plain.gguf"), filepath.Join(dir, "over.gguf")
	runOK(t, "quantize", src, plain, "--recipe", "q8_0")
	runOK(t, "quantize", src, over, "--recipe", "q8_0", "--override", name+"=F16")
	if a, b := tensorType(t, plain, name), tensorType(t, over, name); a != "Q8_0" || b != "F16" {
		t.Errorf("quantize: %s is %s without --override and %s with it", name, a, b)
	}
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	out := filepath.Join(dir, "build")
	runOK(t, "build", src, out, "--recipe", "q8_0", "--override", name+"=F16", "--stages", "1", "--ar", "8,1", "--cl", "64", "--calibrate", "0", "--no-verify", "-q")
	if got := tensorType(t, filepath.Join(out, "work", "qmodel.gguf"), name); got != "F16" {
		t.Errorf("build --override: %s is %s", name, got)
	}
}

// TestCheckMaxContextBytes: a limit below a stage's bytes is a violation.
func TestCheckMaxContextBytes(t *testing.T) {
	needStories(t)
	plan := filepath.Join(t.TempDir(), "plan.json")
	runOK(t, "plan", storiesGGUF, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", plan)
	runOK(t, "check", plan)
	var code int
	out := captureStdout(t, func() { code = run([]string{"check", plan, "--max-context-bytes", "100KiB"}) })
	if code != 1 || !strings.Contains(out, "QNN-CONTEXT") {
		t.Errorf("--max-context-bytes 100KiB: exit %d\n%s", code, out)
	}
}

// TestEstimateWeightFraction: keeping half the weights halves the
// weight-streaming term.
func TestEstimateWeightFraction(t *testing.T) {
	var terms []float64
	for _, f := range []string{"1", "0.5"} {
		out := runOK(t, "estimate", "--weights-gb", "4", "--bandwidth", "40", "--position-ms", "10", "--draft-step-ms", "5", "--host-ms", "5", "--weight-fraction", f, "--json")
		var w struct {
			WeightsMs float64 `json:"weights_ms"`
		}
		if err := json.Unmarshal([]byte(out), &w); err != nil {
			t.Fatal(err, out)
		}
		terms = append(terms, w.WeightsMs)
	}
	if terms[0] <= 0 || terms[1] != terms[0]/2 {
		t.Errorf("weights term %v ms with fraction 1 and 0.5", terms)
	}
}

// TestGoldenRecordFlags: -n sets the continuation length, --top-k the
// logits kept per step, --ctx the context the decode must fit in.
func TestGoldenRecordFlags(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	prompts := writeText(t, dir, "prompts.txt", "ids: 1 403 407\n")
	g := filepath.Join(dir, "g.json")
	runOK(t, "golden", "record", storiesGGUF, "--prompts", prompts, "-n", "7", "--top-k", "3", g)
	f, err := golden.Read(g)
	if err != nil {
		t.Fatal(err)
	}
	if p := f.Prompts[0]; len(p.Expected) != 7 || len(p.TopK) != 7 || len(p.TopK[0]) != 3 || f.Settings.TopK != 3 {
		t.Errorf("-n 7 --top-k 3: %d tokens, top-k %d×%d", len(p.Expected), len(p.TopK), len(p.TopK[0]))
	}
	var code int
	captureStderr(t, func() {
		code = run([]string{"golden", "record", storiesGGUF, "--prompts", prompts, "-n", "7", "--ctx", "6", g})
	})
	if code != 1 {
		t.Errorf("--ctx 6 for 3 + 7 tokens: exit %d, want 1", code)
	}
	runOK(t, "golden", "record", storiesGGUF, "--prompts", prompts, "-n", "7", "--ctx", "16", g)
}

// TestRunKVF16: --kv-f16 computes attention over an F16 cache, which moves
// the logits.
func TestRunKVF16(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	var logits []string
	for _, extra := range [][]string{nil, {"--kv-f16"}} {
		path := filepath.Join(dir, "logits.bin")
		runOK(t, append([]string{"run", storiesGGUF, "--ids", "1,403,407", "-n", "8", "--logits", path}, extra...)...)
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			t.Fatal(err)
		}
		logits = append(logits, string(b))
	}
	if logits[0] == logits[1] {
		t.Error("--kv-f16 left the logits bit-identical")
	}
}

// TestSpeculateFlags: --prompt-file gives the prompt (the same result as
// --ids with its ids), --ctx bounds the context.
func TestSpeculateFlags(t *testing.T) {
	needStories(t)
	file := writeText(t, t.TempDir(), "prompt.txt", "ids: 1 403 407")
	base := []string{"speculate", storiesGGUF, "--draft", storiesGGUF, "-k", "2", "-n", "12", "--json"}
	var a, b runtime.Comparison
	json.Unmarshal([]byte(runOK(t, append(base, "--ids", "1,403,407")...)), &a)
	json.Unmarshal([]byte(runOK(t, append(base, "--prompt-file", file)...)), &b)
	if len(a.Generated) != 12 || jsonString(a.Prompt) != "[1,403,407]" || jsonString(b.Prompt) != jsonString(a.Prompt) || jsonString(b.Generated) != jsonString(a.Generated) {
		t.Errorf("--prompt-file gave %v → %v, --ids %v → %v", b.Prompt, b.Generated, a.Prompt, a.Generated)
	}
	var code int
	captureStderr(t, func() { code = run(append(base, "--ids", "1,403,407", "--ctx", "8")) })
	if code != 1 {
		t.Errorf("--ctx 8 for 3 + 12 tokens: exit %d, want 1", code)
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestVerifyEagle3: --eagle3 adds a speculative decode through the head,
// whose report carries acceptance statistics and the greedy tokens.
func TestVerifyEagle3(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	prompts := writeText(t, dir, "prompts.txt", "ids: 1 403 407\n")
	g := filepath.Join(dir, "g.json")
	runOK(t, "golden", "record", storiesGGUF, "--prompts", prompts, "-n", "12", g)
	head := filepath.Join(dir, "eagle3.gguf")
	writeRandomEagle3(t, head)
	out := runOK(t, "verify", storiesGGUF, "--golden", g, "--eagle3", head, "-k", "2", "--json")
	var rs []golden.Report
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 2 || !rs[1].Pass || rs[1].Decoder == rs[0].Decoder {
		t.Fatalf("verify --eagle3: %v\n%s", err, out)
	}
}

// TestCompareGolden: the quality columns come from the golden given: the
// model that recorded it matches it exactly, a 1-bit variant does not.
func TestCompareGolden(t *testing.T) {
	// An ordinary F32 model: q1 changes its logits (of synthLlamaGGUF's
	// 1-bit-native one it would copy every tensor).
	dir := t.TempDir()
	src := filepath.Join(dir, "llama.gguf")
	if err := synth.WriteGGUF(src, synth.Config(model.Llama, true), 3, gguf.F32); err != nil {
		t.Fatal(err)
	}
	prompts := writeText(t, dir, "prompts.txt", "ids: 1 3 5 7\nids: 2 4 6\n")
	q1 := filepath.Join(dir, "q1.gguf")
	runOK(t, "quantize", src, q1, "--recipe", "q1")
	var rows [2][]compareRow
	for i, m := range []string{src, q1} {
		g := filepath.Join(dir, "g.json")
		runOK(t, "golden", "record", m, "--prompts", prompts, "-n", "16", g)
		json.Unmarshal([]byte(runOK(t, "compare", src, "--golden", g, "--json")), &rows[i])
	}
	if len(rows[0]) != 1 || len(rows[1]) != 1 || *rows[0][0].Quality.Cosine != 1 || *rows[1][0].Quality.Cosine >= 1 {
		t.Errorf("compare of the source against its own golden and the q1 golden: %s / %s", jsonString(rows[0]), jsonString(rows[1]))
	}
}
