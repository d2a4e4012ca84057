package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/shard"
)

// TestPlanSizedForOtherWeights: a plan made for stories260K's F32 weights
// and one made for its Q8_0 quantization have one shape, but export and
// bundle build/assemble refuse each with the other model, naming the plan,
// the stage, both sizes and the fix (the manifest and the 2 GiB rule would
// otherwise state the plan's sizes for the other weights); each plan with
// its own model passes.
func TestPlanSizedForOtherWeights(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	f32Plan, graphs := storiesBundleInputs(t, dir) // F32, two stages, fake graphs
	q8 := filepath.Join(dir, "q8.gguf")
	q8Plan := filepath.Join(dir, "q8plan.json")
	captureStdout(t, func() {
		require.Equal(t, 0, run([]string{"quantize", storiesGGUF, q8, "--recipe", "q8_0"}))
		require.Equal(t, 0, run([]string{"plan", q8, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", q8Plan}))
	})
	stage0 := func(path string) string {
		p, err := shard.ReadPlan(path)
		require.NoError(t, err)
		return bytesize.Format(p.Stages[0].Bytes)
	}
	f32Bytes, q8Bytes := stage0(f32Plan), stage0(q8Plan)
	require.NotEqual(t, f32Bytes, q8Bytes)
	refusal := func(plan, planBytes, model, modelBytes string) string {
		return plan + ": sized for other weights: stage 0 " + planBytes + " on the device (4bit container), this model " + modelBytes + " (2 of 2 stages differ)" +
			"; run `qnnprep plan " + model + "` (with the flags that made this plan) for a plan of this model"
	}
	f32ForQ8 := refusal(f32Plan, f32Bytes, q8, q8Bytes)
	q8ForF32 := refusal(q8Plan, q8Bytes, storiesGGUF, f32Bytes)

	bundle := func(verb, plan, model, out string, more ...string) []string {
		return slices.Concat([]string{"bundle", verb, "--plan", plan, "--model", model, "--graphs", graphs, "--out", filepath.Join(dir, out), "--soc", "8elite"}, more)
	}
	sdk := fakeSDKRoot(t)
	cache := filepath.Join(dir, "cache")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr; with code 0 or a later failure, the refusal must be absent
	}{
		{"export: F32 weights, Q8_0 plan", []string{"export", "onnx", q8Plan, storiesGGUF, filepath.Join(dir, "x1"), "-q"}, 1, q8ForF32},
		{"export: Q8_0 weights, F32 plan", []string{"export", "onnx", f32Plan, q8, filepath.Join(dir, "x2"), "-q"}, 1, f32ForQ8},
		{"export: Q8_0 weights, their plan", []string{"export", "onnx", q8Plan, q8, filepath.Join(dir, "x3"), "-q"}, 0, ""},
		{"bundle build: Q8_0 weights, F32 plan", bundle("build", f32Plan, q8, "b1", "--dry-run"), 1, f32ForQ8},
		{"bundle build: F32 weights, their plan", bundle("build", f32Plan, storiesGGUF, "b2", "--dry-run"), 0, ""},
		{"bundle assemble: Q8_0 weights, F32 plan", bundle("assemble", f32Plan, q8, "a1", "--cache", cache, "--qnn-sdk", sdk), 1, f32ForQ8},
		// Past the plan, the empty cache stops it.
		{"bundle assemble: F32 weights, their plan", bundle("assemble", f32Plan, storiesGGUF, "a2", "--cache", cache, "--qnn-sdk", sdk), 1, "the cache lacks 2 stage(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var code int
			stderr := captureStderr(t, func() { captureStdout(t, func() { code = run(tc.args) }) })
			assert.Equal(t, tc.code, code, stderr)
			assert.NotContains(t, stderr, "panic")
			if tc.want != "" {
				assert.Contains(t, stderr, tc.want)
			}
			if tc.want != f32ForQ8 && tc.want != q8ForF32 {
				assert.NotContains(t, stderr, "sized for other weights")
			}
		})
	}
}
