package scaleout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

// TestMain doubles as a shard process: with SCALEOUT_TEST_SHARD set, the
// test binary builds one shard and exits, so the tests can run shards as
// separate processes, concurrently, like CI jobs.
func TestMain(m *testing.M) {
	if spec := os.Getenv("SCALEOUT_TEST_SHARD"); spec != "" {
		if err := shardMain(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(fakesdk.Main(m))
}

func shardMain(spec string) error {
	s, err := ParseShard(spec)
	if err != nil {
		return err
	}
	p, err := shard.ReadPlan(os.Getenv("SCALEOUT_TEST_PLAN"))
	if err != nil {
		return err
	}
	graphs := os.Getenv("SCALEOUT_TEST_GRAPHS")
	files, err := qnnpack.FindGraphFiles(p, graphs)
	if err != nil {
		return err
	}
	sdk, err := qnnpack.FindSDK(os.Getenv("SCALEOUT_TEST_SDK"))
	if err != nil {
		return err
	}
	_, _, err = BuildShard(context.Background(), qnnpack.BuildOptions{
		SDK: sdk, Plan: p, Config: fakesdk.ModelConfig(8), Graphs: files, WorkDir: os.Getenv("SCALEOUT_TEST_WORK"),
		SoC: "8elite", Cache: &DirCache{Dir: os.Getenv("SCALEOUT_TEST_CACHE")},
	}, s)
	return err
}

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shard
		err  string
	}{
		{"0/4", Shard{0, 4}, ""},
		{"3/4", Shard{3, 4}, ""},
		{"4/4", Shard{}, "index 4, want 0 to 3"},
		{"-1/4", Shard{}, "index -1"},
		{"1/0", Shard{}, "count 0"},
		{"1", Shard{}, "want INDEX/COUNT"},
		{"a/b", Shard{}, "two integers"},
	} {
		got, err := ParseShard(tc.in)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestShardFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name             string
		k8s, slurm, smin string
		count            int
		want             Shard
		ok               bool
		err              string
	}{
		{name: "none", count: 4},
		{name: "kubernetes", k8s: "2", count: 4, want: Shard{2, 4}, ok: true},
		{name: "slurm from 0", slurm: "3", count: 4, want: Shard{3, 4}, ok: true},
		{name: "slurm from 1", slurm: "4", smin: "1", count: 4, want: Shard{3, 4}, ok: true},
		{name: "kubernetes wins", k8s: "1", slurm: "3", count: 4, want: Shard{1, 4}, ok: true},
		{name: "out of range", k8s: "4", count: 4, ok: true, err: "index 4, want 0 to 3"},
		{name: "garbage", slurm: "x", count: 4, ok: true, err: "not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvK8sIndex, tc.k8s)
			t.Setenv(EnvSlurmIndex, tc.slurm)
			t.Setenv(EnvSlurmMin, tc.smin)
			got, ok, err := ShardFromEnv(tc.count)
			assert.Equal(t, tc.ok, ok)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestOwnersBalancesStageBytes: every stage has one owner, every shard
// gets a stage, and no shard carries more than the lightest one plus the
// largest stage (the greedy split's bound).
func TestOwnersBalancesStageBytes(t *testing.T) {
	p := &shard.Plan{}
	for _, b := range []int64{90, 10, 10, 40, 40, 30, 70, 20} {
		p.Stages = append(p.Stages, shard.Stage{Bytes: b})
	}
	for n := 1; n <= len(p.Stages); n++ {
		owners, err := Owners(p, n)
		require.NoError(t, err)
		load := make([]int64, n)
		for s, o := range owners {
			require.True(t, o >= 0 && o < n)
			load[o] += p.Stages[s].Bytes
		}
		assert.LessOrEqual(t, slices.Max(load)-slices.Min(load), int64(90), "n=%d loads %v", n, load)
		assert.NotContains(t, load, int64(0), "n=%d: a shard without a stage", n)
		again, _ := Owners(p, n)
		assert.Equal(t, owners, again)
	}
	owners, _ := Owners(p, 2)
	// Largest first: 90→0, 70→1, 40→1, 40→0, 30→1, 20→0, 10→1, 10→0 (a tie at 150 goes to the lower shard).
	assert.Equal(t, []int{0, 1, 0, 1, 0, 1, 1, 0}, owners)
	_, err := Owners(p, 9)
	assert.ErrorContains(t, err, "at most 8")
}

// TestShardsThenAssembleEqualsOneBuild runs 3 shard processes at once,
// each in its own work directory, sharing one cache directory; one fails.
// Assemble names the failed shard's stages; after that shard is rerun
// alone, assemble writes a bundle byte-identical to a one-process build's,
// without running a tool.
func TestShardsThenAssembleEqualsOneBuild(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	one := filepath.Join(t.TempDir(), "bundle")
	_, err := qnnpack.Build(ctx, e.options(one, one+".work"))
	require.NoError(t, err)

	planPath := filepath.Join(t.TempDir(), "plan.json")
	pj, err := shard.Encode(e.plan)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(planPath, pj, 0o644))
	cache := t.TempDir()
	const n = 3
	owners, err := Owners(e.plan, n)
	require.NoError(t, err)
	failStage := slices.Index(owners, 1)
	failBin := qnnpack.ContextBinaryName(e.plan, failStage)

	runShard := func(i int, fail bool) error {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(),
			"SCALEOUT_TEST_SHARD="+Shard{i, n}.String(), "SCALEOUT_TEST_PLAN="+planPath,
			"SCALEOUT_TEST_GRAPHS="+e.in, "SCALEOUT_TEST_SDK="+e.sdk.Root,
			"SCALEOUT_TEST_WORK="+filepath.Join(t.TempDir(), fmt.Sprintf("work%d", i)),
			"SCALEOUT_TEST_CACHE="+cache)
		if fail {
			cmd.Env = append(cmd.Env, "FAKESDK_FAIL="+qnnpack.ToolCtxGen+":"+failBin)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("shard %d: %v\n%s", i, err, out)
		}
		return nil
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = runShard(i, i == 1) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[2])
	require.ErrorContains(t, errs[1], "injected failure")

	calls := filepath.Join(t.TempDir(), "calls.jsonl")
	t.Setenv("FAKESDK_CALLS", calls)
	assembled := filepath.Join(t.TempDir(), "bundle")
	o := e.options(assembled, filepath.Join(t.TempDir(), "assemble.work"))
	o.Cache = &DirCache{Dir: cache}
	_, err = Assemble(ctx, o, n)
	var miss *MissingError
	require.True(t, errors.As(err, &miss), "%v", err)
	assert.Contains(t, miss.Stages, failStage)
	for i := range miss.Stages {
		assert.Equal(t, 1, miss.Owners[i], "stage %d", miss.Stages[i]+1)
	}
	assert.Contains(t, err.Error(), fmt.Sprintf("stage %d (%s): shard 1/3 (--shard 1/3)", failStage+1, failBin))
	assert.NoDirExists(t, assembled)
	assert.NoFileExists(t, calls, "assemble ran an SDK tool")

	require.NoError(t, runShard(1, false))
	os.Remove(calls)
	res, err := Assemble(ctx, o, n)
	require.NoError(t, err)
	for _, r := range res.Runs {
		assert.True(t, r.Cached, r.Job.Name())
	}
	assert.NoFileExists(t, calls, "assemble ran an SDK tool")
	want, got := testkit.ReadTree(t, one), testkit.ReadTree(t, assembled)
	require.Equal(t, len(want), len(got))
	for name, b := range want {
		assert.True(t, got[name] == b, "%s differs from the one-process build's", name)
	}
	_, err = qnnpack.VerifyBundle(assembled)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(res.Bundle, "bundle"))
}
