package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/scaleout"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// TestBundleShardsAndAssemble: two shards (one by --shard, one by
// --shard-count and $JOB_COMPLETION_INDEX) fill a cache directory;
// assemble names a missing stage's shard, needs the shards' converter
// arguments and SDK, and then writes the one-process bundle byte for byte
// without running a tool.
func TestBundleShardsAndAssemble(t *testing.T) {
	dir := t.TempDir()
	planPath, graphs := storiesBundleInputs(t, dir)
	plan, err := shard.ReadPlan(planPath)
	require.NoError(t, err)
	root := fakeSDKRoot(t)
	t.Setenv("QNN_SDK_ROOT", root)
	calls := filepath.Join(dir, "calls.jsonl")
	t.Setenv("FAKESDK_CALLS", calls)

	// A tokenizer.json other than the one written from the vocabulary.
	m, err := model.Open(storiesGGUF)
	require.NoError(t, err)
	bt, err := pipeline.ModelTokenizer(m, "", nil, nil)
	m.Close()
	require.NoError(t, err)
	v, err := tokenizer.ParseHF(bt.JSON)
	require.NoError(t, err)
	v.AddBOS = false
	custom, err := tokenizer.WriteHF(v)
	require.NoError(t, err)
	tokPath := filepath.Join(dir, "tokenizer.json")
	require.NoError(t, os.WriteFile(tokPath, custom, 0o644))

	common := []string{"--plan", planPath, "--model", storiesGGUF, "--graphs", graphs, "--soc", "8gen3",
		"--converter-arg=--float_bitwidth", "--converter-arg=16"}
	one := filepath.Join(dir, "one")
	require.Equal(t, 0, run(slices.Concat([]string{"bundle", "build"}, common, []string{"--out", one, "--tokenizer", tokPath})))
	os.Remove(calls)

	cache := filepath.Join(dir, "cache")
	owners, err := scaleout.Owners(plan, 2)
	require.NoError(t, err)
	shard0 := filepath.Join(dir, "s0")
	require.Equal(t, 0, run(slices.Concat([]string{"bundle", "build"}, common, []string{"--out", shard0, "--shard", "0/2", "--cache", cache})))
	assert.NoDirExists(t, shard0, "a shard wrote a bundle")
	for _, c := range fakesdk.Calls(t, calls) {
		if bin := c.Flag("--binary_file"); bin != "" {
			assert.Equal(t, qnnpack.ContextBinaryName(plan, slices.Index(owners, 0)), bin, "shard 0 built another shard's stage")
		}
	}

	out := filepath.Join(dir, "assembled")
	work := filepath.Join(dir, "assemble.work")
	t.Setenv("QNN_SDK_ROOT", "")
	assemble := slices.Concat([]string{"bundle", "assemble"}, common, []string{"--out", out, "--work", work, "--cache", cache, "--tokenizer", tokPath, "--qnn-sdk", root})
	missing := qnnpack.ContextBinaryName(plan, slices.Index(owners, 1))
	var code int
	stderr := captureStderr(t, func() { code = run(slices.Concat(assemble, []string{"--shard-count", "2"})) })
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, missing+"): shard 1/2 (--shard 1/2)")
	stderr = captureStderr(t, func() { code = run(assemble) })
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, missing+")")
	assert.NotContains(t, stderr, "--shard 1/2", "without --shard-count assemble cannot know the owner")

	t.Setenv(scaleout.EnvK8sIndex, "1")
	require.Equal(t, 0, run(slices.Concat([]string{"bundle", "build"}, common, []string{"--out", filepath.Join(dir, "s1"), "--shard-count", "2", "--cache", cache, "--qnn-sdk", root})))
	t.Setenv(scaleout.EnvK8sIndex, "")
	os.Remove(calls)

	// The converter arguments are part of every key; the SDK's version too.
	noConv := slices.DeleteFunc(slices.Clone(assemble), func(a string) bool { return strings.HasPrefix(a, "--converter-arg") })
	stderr = captureStderr(t, func() { code = run(noConv) })
	assert.Equal(t, 1, code, "assemble found stages built with other converter arguments")
	assert.Contains(t, stderr, "the cache lacks 2 stage(s)")
	// So is the SoC, through the compile config.
	otherSoC := slices.Clone(assemble)
	i := slices.Index(otherSoC, "--soc")
	otherSoC = slices.Replace(otherSoC, i, i+2, "--soc-model", "99", "--dsp-arch", "v83")
	stderr = captureStderr(t, func() { code = run(otherSoC) })
	assert.Equal(t, 1, code, "assemble found stages compiled for another SoC")
	assert.Contains(t, stderr, "the cache lacks 2 stage(s)")
	noSDK := slices.Clone(assemble[:len(assemble)-2])
	assert.Equal(t, 1, run(noSDK), "assemble without the SDK")

	require.Equal(t, 0, run(slices.Concat(assemble, []string{"--shard-count", "2"})))
	assert.NoFileExists(t, calls, "assemble ran an SDK tool")
	assert.Equal(t, testkit.ReadTree(t, one), testkit.ReadTree(t, out))
	assert.DirExists(t, filepath.Join(work, "stage_01"))
	got, _ := os.ReadFile(filepath.Join(out, qnnpack.TokenizerName))
	assert.Equal(t, string(custom), string(got))

	// --shard and --shard-count together, or --shard without a cache, are
	// usage errors.
	assert.Equal(t, 2, run(slices.Concat([]string{"bundle", "build"}, common, []string{"--out", shard0, "--shard", "0/2", "--shard-count", "2", "--cache", cache})))
	assert.Equal(t, 2, run(slices.Concat([]string{"bundle", "build"}, common, []string{"--out", shard0, "--shard", "0/2"})))
}

// TestBundlePackUnpackCommands: pack writes the same archive twice;
// unpack gives back the bundle, verified, and refuses a changed archive.
func TestBundlePackUnpackCommands(t *testing.T) {
	dir := t.TempDir()
	planPath, graphs := storiesBundleInputs(t, dir)
	t.Setenv("QNN_SDK_ROOT", fakeSDKRoot(t))
	b := filepath.Join(dir, "bundle")
	require.Equal(t, 0, run([]string{"bundle", "build", "--plan", planPath, "--model", storiesGGUF, "--graphs", graphs, "--out", b, "--soc", "8gen3"}))
	p1, p2 := filepath.Join(dir, "a.tar.zst"), filepath.Join(dir, "b.tar.zst")
	require.Equal(t, 0, run([]string{"bundle", "pack", b, p1}))
	require.Equal(t, 0, run([]string{"bundle", "pack", b, p2}))
	a1, _ := os.ReadFile(p1)
	a2, _ := os.ReadFile(p2)
	assert.Equal(t, a1, a2)
	out := filepath.Join(dir, "out")
	require.Equal(t, 0, run([]string{"bundle", "unpack", p1, out}))
	assert.Equal(t, testkit.ReadTree(t, b), testkit.ReadTree(t, out))
	assert.Equal(t, 0, run([]string{"bundle", "verify", out}))
	// Truncated archive: refused, nothing written.
	require.NoError(t, os.WriteFile(p2, a1[:len(a1)/2], 0o644))
	assert.Equal(t, 1, run([]string{"bundle", "unpack", p2, filepath.Join(dir, "out2")}))
	assert.NoDirExists(t, filepath.Join(dir, "out2"))
	// The archive may not be written into the bundle it packs.
	assert.Equal(t, 1, run([]string{"bundle", "pack", b, filepath.Join(b, "x.tar.zst")}))
}

// TestBundlePushPullCommands moves a bundle through the test registry.
func TestBundlePushPullCommands(t *testing.T) {
	host := os.Getenv("QNNPREP_TEST_REGISTRY")
	if host == "" {
		if os.Getenv("QNNPREP_REQUIRE_PEERS") == "1" {
			t.Fatal("QNNPREP_TEST_REGISTRY is not set and QNNPREP_REQUIRE_PEERS=1")
		}
		t.Skip("QNNPREP_TEST_REGISTRY not set: no OCI registry to test against (.ci/run starts one)")
	}
	dir := t.TempDir()
	planPath, graphs := storiesBundleInputs(t, dir)
	t.Setenv("QNN_SDK_ROOT", fakeSDKRoot(t))
	b := filepath.Join(dir, "bundle")
	require.Equal(t, 0, run([]string{"bundle", "build", "--plan", planPath, "--model", storiesGGUF, "--graphs", graphs, "--out", b, "--soc", "8gen3"}))
	ref := fmt.Sprintf("%s/qnnprep-cmd-test/bundle:%d", host, os.Getpid())
	require.Equal(t, 0, run([]string{"bundle", "push", b, ref}))
	out := filepath.Join(dir, "pulled")
	require.Equal(t, 0, run([]string{"bundle", "pull", ref, out}))
	assert.Equal(t, testkit.ReadTree(t, b), testkit.ReadTree(t, out))
	assert.Equal(t, 1, run([]string{"bundle", "pull", ref + "-nope", filepath.Join(dir, "none")}))
}

// TestBuildShards: two 'qnnprep build' shards (--shard, then
// --shard-count with $JOB_COMPLETION_INDEX) compile their stages into a
// shared --cache and write no bundle; bundle assemble from one shard's
// work directory then writes a bundle that verifies, and finds nothing in
// another cache.
func TestBuildShards(t *testing.T) {
	src := synthLlamaGGUF(t)
	dir := t.TempDir()
	root := fakeSDKRoot(t)
	cache := filepath.Join(dir, "cache")
	args := func(out string) []string {
		return []string{"build", src, out, "--recipe", "int8", "--stages", "2", "--ar", "32,1", "--cl", "256", "--qnn-sdk", root, "-n", "4", "-q", "--no-verify", "--cache", cache}
	}
	out0, out1 := filepath.Join(dir, "out0"), filepath.Join(dir, "out1")
	var code int
	stdout := captureStdout(t, func() { code = run(append(args(out0), "--shard", "0/2")) })
	require.Equal(t, 0, code, stdout)
	assert.NoDirExists(t, filepath.Join(out0, pipeline.BundleDir))
	var sum pipeline.Result
	sb, err := os.ReadFile(filepath.Join(out0, pipeline.SummaryName))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(sb, &sum))
	assert.Equal(t, pipeline.StatusSkipped, sum.Step(pipeline.StepBundle).Status)
	assert.Contains(t, sum.Step(pipeline.StepSDK).Note, "shard 0/2, stages ")

	t.Setenv(scaleout.EnvK8sIndex, "1")
	require.Equal(t, 0, run(append(args(out1), "--shard-count", "2")))
	t.Setenv(scaleout.EnvK8sIndex, "")

	work := filepath.Join(out0, pipeline.WorkDir)
	assemble := []string{"bundle", "assemble", "--plan", filepath.Join(work, pipeline.PlanName), "--model", filepath.Join(work, pipeline.QModelName),
		"--graphs", filepath.Join(work, pipeline.ONNXDir), "--soc", "8elite", "--qnn-sdk", root, "--shard-count", "2"}
	bundle := filepath.Join(dir, "bundle")
	assert.Equal(t, 1, run(append(assemble, "--out", bundle, "--cache", filepath.Join(dir, "empty"))), "assemble from an empty cache")
	require.Equal(t, 0, run(append(assemble, "--out", bundle, "--cache", cache)))
	assert.Equal(t, 0, run([]string{"bundle", "verify", bundle}))

	assert.Equal(t, 2, run(append(args(filepath.Join(dir, "out2")), "--shard", "0/2", "--dry-run")))
}
