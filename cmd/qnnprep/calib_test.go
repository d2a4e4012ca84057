package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/shard"
)

// calibText is a few lines of the kind of text stories260K was trained
// on, for calibration; simText is other text of that kind, for verifying.
const (
	calibText = `Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine.
One day, she saw a big red ball in the park. She wanted to play with it, but it was too high.
Tom and his dog went to the beach. They found a shiny shell and took it home to show mom.
The sun was hot, so the cat slept under the tree all day long.
Ben had a toy car. He liked to race it on the floor with his friend Sam.
Mom made a big cake for the party. Everyone was happy and sang a song.
`
	simText = "The little bird sang in the tree.\nA boy named Tim found a box in the garden.\n"
)

// storiesPlan quantizes stories260K with int8, plans it in two stages and
// writes the calibration text; it returns the qmodel, plan and text paths.
func storiesPlan(t *testing.T) (q, plan, text string) {
	t.Helper()
	dir := t.TempDir()
	q, plan, text = filepath.Join(dir, "int8.gguf"), filepath.Join(dir, "plan.json"), filepath.Join(dir, "calib.txt")
	runOK(t, "quantize", storiesGGUF, q, "--recipe", "int8")
	runOK(t, "plan", q, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", plan)
	require.NoError(t, os.WriteFile(text, []byte(calibText), 0o644))
	return q, plan, text
}

func readCal(t *testing.T, path string) (*onnx.Calibration, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	c, err := onnx.DecodeCalibration(b, path)
	require.NoError(t, err)
	return c, b
}

// TestExportCalibText: export --calib-text calibrates on the text with
// the model's tokenizer, writes a deterministic ranges.json that records
// the text, model and settings beside the graphs, and builds the
// activation encodings from it; --calib-split, --calib-samples,
// --calib-len and --calib-stat each change the ranges, and --ranges reads
// the file back into the same encodings.
func TestExportCalibText(t *testing.T) {
	q, plan, text := storiesPlan(t)
	dir := t.TempDir()
	export := func(name string, extra ...string) string {
		out := filepath.Join(dir, name)
		runOK(t, append([]string{"export", "onnx", plan, q, out, "-q"}, extra...)...)
		return out
	}
	calib := []string{"--calib-text", text, "--calib-len", "24"}
	base := export("base", calib...)
	cal, raw := readCal(t, filepath.Join(base, "ranges.json"))
	sum := sha256.Sum256([]byte(calibText))
	assert.Equal(t, &onnx.CalibText{SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(calibText))}, cal.Text)
	assert.Equal(t, "llama", cal.Model.Arch)
	assert.Len(t, cal.Model.SHA256, 64)
	assert.Equal(t, "text", cal.Settings.Source)
	assert.Equal(t, pipeline.SplitLines, cal.Settings.Split)
	assert.Equal(t, 6, cal.Settings.Samples)
	assert.Equal(t, 24, cal.Settings.Len)
	assert.Equal(t, "minmax", cal.Settings.Stat)

	// The encodings take their ranges from it: past_key_0's scale spans
	// its calibrated range (and 0) in 16 bits.
	p, err := shard.ReadPlan(plan)
	require.NoError(t, err)
	g := p.Graphs[0].Name
	enc, err := onnx.ReadEncodings(filepath.Join(base, g+".encodings.json"))
	require.NoError(t, err)
	r := cal.Ranges["past_key_0"]
	a := enc.Activation("past_key_0_out")
	require.NotNil(t, a)
	assert.Equal(t, (max(r.Max, 0)-min(r.Min, 0))/(1<<16-1), a.Scale[0])

	again := export("again", calib...)
	_, raw2 := readCal(t, filepath.Join(again, "ranges.json"))
	assert.Equal(t, string(raw), string(raw2), "same text, model and settings: same ranges.json")

	for _, tc := range []struct{ flag, value string }{
		{"--calib-split", "windows"},
		{"--calib-samples", "2"},
		{"--calib-len", "12"},
		{"--calib-stat", "p99"},
	} {
		out := export(strings.TrimPrefix(tc.flag, "--"), append(append([]string(nil), calib...), tc.flag, tc.value)...)
		c, _ := readCal(t, filepath.Join(out, "ranges.json"))
		assert.NotEqual(t, cal.Ranges, c.Ranges, tc.flag)
		assert.NotEqual(t, cal.Settings, c.Settings, tc.flag)
	}

	// --ranges reads ranges.json back: the same encodings, nothing
	// calibrated.
	reread := export("reread", "--ranges", filepath.Join(base, "ranges.json"))
	for _, pg := range p.Graphs {
		want, _ := os.ReadFile(filepath.Join(base, pg.Name+".encodings.json"))
		got, _ := os.ReadFile(filepath.Join(reread, pg.Name+".encodings.json"))
		assert.Equal(t, string(want), string(got), pg.Name)
	}
	_, err = os.Stat(filepath.Join(reread, "ranges.json"))
	assert.True(t, os.IsNotExist(err), "export without calibration wrote a ranges file")

	for _, args := range [][]string{
		{"--calib-len", "8"},
		{"--calib-text", text, "--calibrate", "4"},
		{"--calib-text", text, "--calib-stat", "p100"},
		{"--calib-text", text, "--calib-split", "pages"},
		{"--calib-stat", "p99"},
	} {
		code := run(append([]string{"export", "onnx", plan, q, filepath.Join(dir, "bad"), "-q"}, args...))
		assert.Equal(t, 2, code, "%v", args)
	}
}

// TestVerifySimulateEncodings: verify --simulate-encodings reports the
// simulated decode against the float decode and passes for calibrated
// encodings; with a KV range ten times too narrow it reports the loss and
// exits 1.
func TestVerifySimulateEncodings(t *testing.T) {
	q, plan, text := storiesPlan(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	runOK(t, "export", "onnx", plan, q, good, "-q", "--calib-text", text, "--calib-len", "24")
	cal, _ := readCal(t, filepath.Join(good, "ranges.json"))
	narrow := map[string][2]float32{}
	for k, r := range cal.Ranges {
		if strings.HasPrefix(k, "past_key_") || strings.HasPrefix(k, "past_value_") {
			r = onnx.Range{Min: r.Min / 10, Max: r.Max / 10}
		}
		narrow[k] = [2]float32{r.Min, r.Max}
	}
	b, _ := json.Marshal(narrow)
	narrowFile := filepath.Join(dir, "narrow.json")
	require.NoError(t, os.WriteFile(narrowFile, b, 0o644))
	bad := filepath.Join(dir, "bad")
	runOK(t, "export", "onnx", plan, q, bad, "-q", "--ranges", narrowFile)

	prompts := writeText(t, dir, "prompts.txt", simText)
	gold := filepath.Join(dir, "golden.json")
	runOK(t, "golden", "record", storiesGGUF, "--prompts", prompts, "-n", "24", gold)

	verify := func(encs string) (int, []map[string]any) {
		var code int
		out := captureStdout(t, func() {
			code = run([]string{"verify", q, "--golden", gold, "--plan", plan, "--simulate-encodings", encs, "--json"})
		})
		var reps []map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &reps), out)
		return code, reps
	}
	code, reps := verify(good)
	require.Len(t, reps, 3) // whole, plan, simulation
	sim := reps[2]
	assert.Contains(t, sim["decoder"], "simulated encodings")
	assert.Equal(t, "its float decode", sim["golden"])
	summary := sim["summary"].(map[string]any)
	t.Logf("calibrated: top-1 %v, cosine %v", summary["top1_agreement"], summary["cosine"])
	assert.Equal(t, 0, code)
	assert.Equal(t, true, sim["pass"])

	code, reps = verify(bad)
	sim = reps[2]
	summary = sim["summary"].(map[string]any)
	t.Logf("KV range ×0.1: top-1 %v, cosine %v, failures %v", summary["top1_agreement"], summary["cosine"], sim["failures"])
	assert.Equal(t, 1, code)
	assert.Equal(t, false, sim["pass"])
	assert.NotEmpty(t, sim["failures"])

	// Without --plan there is nothing to simulate through.
	assert.Equal(t, 2, run([]string{"verify", q, "--golden", gold, "--simulate-encodings", good}))
}

// TestBuildCalibSimulate: build --calib-text calibrates on the text and
// writes work/ranges.json; the simulate step runs by default and fails
// the build when the encodings lose too much (ranges clipped at the
// 50.5th percentile); --simulate=false skips it.
func TestBuildCalibSimulate(t *testing.T) {
	_, _, text := storiesPlan(t)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	dir := t.TempDir()
	build := func(out string, extra ...string) (int, *pipeline.Result) {
		var code int
		stdout := captureStdout(t, func() {
			code = run(append([]string{"build", storiesGGUF, out, "--recipe", "int8", "--dry-run", "--stages", "2", "--ar", "32,1", "--cl", "128", "-n", "8", "-q", "--json"}, extra...))
		})
		var res pipeline.Result
		require.NoError(t, json.Unmarshal([]byte(stdout[strings.Index(stdout, "{\n"):]), &res), stdout)
		return code, &res
	}
	code, res := build(filepath.Join(dir, "a"), "--calib-text", text, "--calib-len", "24")
	assert.Equal(t, 0, code)
	assert.Equal(t, filepath.Join(dir, "a", "work", "ranges.json"), res.Ranges)
	cal, _ := readCal(t, res.Ranges)
	assert.Equal(t, "text", cal.Settings.Source)
	require.NotNil(t, res.Simulation)
	assert.True(t, res.Simulation.Pass)
	assert.Equal(t, pipeline.StatusOK, res.Step(pipeline.StepSimulate).Status)

	code, res = build(filepath.Join(dir, "b"), "--calib-text", text, "--calib-len", "24", "--calib-stat", "p50.5")
	assert.Equal(t, 1, code, "a build whose encodings clip the activations passed")
	require.NotNil(t, res.Simulation)
	assert.False(t, res.Simulation.Pass)
	assert.Contains(t, res.Step(pipeline.StepSimulate).Note, "LOSS above the thresholds")

	code, res = build(filepath.Join(dir, "c"), "--calib-text", text, "--calib-len", "24", "--calib-stat", "p50.5", "--simulate=false")
	assert.Equal(t, 0, code)
	assert.Nil(t, res.Simulation)
	assert.Equal(t, pipeline.StatusSkipped, res.Step(pipeline.StepSimulate).Status)

	// The text flags reach the calibration.
	_, res = build(filepath.Join(dir, "w"), "--calib-text", text, "--calib-split", "windows", "--calib-samples", "2", "--calib-len", "16")
	cal, _ = readCal(t, res.Ranges)
	assert.Equal(t, onnx.CalibSettings{Source: "text", Split: "windows", Samples: 2, Len: 16, Tokens: 32, BOS: true, Stat: "minmax"}, cal.Settings)

	// Greedy calibration (the default) writes its ranges file too.
	_, res = build(filepath.Join(dir, "d"))
	cal, _ = readCal(t, res.Ranges)
	assert.Equal(t, "greedy", cal.Settings.Source)
	assert.Equal(t, 2, run([]string{"build", storiesGGUF, filepath.Join(dir, "e"), "--recipe", "int8", "--calib-text", text, "--calibrate", "8"}))
}
