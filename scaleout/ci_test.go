package scaleout

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

func ciOptions(t *testing.T, cache string, shards int) CIOptions {
	return CIOptions{
		Plan: testPlan(t), PlanPath: "models/tiny/plan.json", Model: "models/tiny/qmodel.gguf", Graphs: "models/tiny/onnx",
		Shards: shards, Cache: cache, SoC: "8elite",
	}
}

func lint(t *testing.T, wf []byte) []*actionlint.Error {
	t.Helper()
	l, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{})
	require.NoError(t, err)
	errs, err := l.Lint(".github/workflows/qnnprep.yml", wf, nil)
	require.NoError(t, err)
	return errs
}

// workflow is the part of a workflow the tests look at.
type workflow struct {
	Permissions map[string]string `json:"permissions"`
	Jobs        map[string]struct {
		Needs    string `json:"needs"`
		Strategy struct {
			Matrix struct {
				Include []struct {
					Shard  int    `json:"shard"`
					Stages string `json:"stages"`
				} `json:"include"`
			} `json:"matrix"`
		} `json:"strategy"`
		Steps []struct {
			Uses string         `json:"uses"`
			Run  string         `json:"run"`
			With map[string]any `json:"with"`
		} `json:"steps"`
	} `json:"jobs"`
}

func TestGitHubWorkflow(t *testing.T) {
	for _, tc := range []struct {
		cache  string
		shards int
	}{
		{"oci://ghcr.io/acme/qnnprep-cache", 3},
		{"oci://registry.example.com/ml/cache", 2},
		{".qnnprep-cache", 4},
	} {
		t.Run(tc.cache, func(t *testing.T) {
			o := ciOptions(t, tc.cache, tc.shards)
			b, err := GitHubWorkflow(o)
			require.NoError(t, err)
			for _, e := range lint(t, b) {
				t.Errorf("actionlint: %s", e.Error())
			}
			var wf workflow
			require.NoError(t, sigsyaml.Unmarshal(b, &wf), "%s", b)
			shardJob, asm := wf.Jobs["shard"], wf.Jobs["assemble"]
			n := strconv.Itoa(tc.shards)

			// The matrix covers every stage exactly once, as Owners splits them.
			owners, _ := Owners(o.Plan, tc.shards)
			cells := shardJob.Strategy.Matrix.Include
			require.Len(t, cells, tc.shards)
			var seen []int
			for i, c := range cells {
				assert.Equal(t, i, c.Shard)
				for _, s := range strings.Split(c.Stages, ",") {
					st, err := strconv.Atoi(s)
					require.NoError(t, err)
					assert.Equal(t, i, owners[st-1])
					seen = append(seen, st)
				}
			}
			slices.Sort(seen)
			assert.Len(t, slices.Compact(seen), len(o.Plan.Stages))

			last := shardJob.Steps[len(shardJob.Steps)-1].Run
			assert.Contains(t, last, "qnnprep bundle build --plan models/tiny/plan.json")
			assert.Contains(t, last, "--shard '${{ matrix.shard }}/"+n+"'")
			assert.Contains(t, last, "--cache "+tc.cache)
			assert.Equal(t, "shard", asm.Needs)
			var runs, uses []string
			for _, s := range asm.Steps {
				runs, uses = append(runs, s.Run), append(uses, s.Uses)
			}
			joined := strings.Join(runs, "\n")
			assert.Contains(t, joined, "qnnprep bundle assemble")
			assert.Contains(t, joined, "--shard-count "+n)
			assert.Contains(t, joined, "qnnprep bundle pack bundle bundle.tar.zst")
			assert.Contains(t, uses, "actions/upload-artifact@v4")
			restores := 0
			for _, u := range uses {
				if u == "actions/cache/restore@v4" {
					restores++
				}
			}
			if strings.HasPrefix(tc.cache, "oci://") {
				assert.Zero(t, restores)
				assert.Contains(t, joined, "docker login")
				assert.Equal(t, strings.HasPrefix(tc.cache, "oci://ghcr.io/"), wf.Permissions["packages"] == "write")
			} else {
				assert.Equal(t, tc.shards, restores, "the assemble job restores every shard's cache")
			}
		})
	}
	// The linter does catch a broken workflow, so the checks above can fail.
	b, err := GitHubWorkflow(ciOptions(t, ".c", 2))
	require.NoError(t, err)
	broken := strings.Replace(string(b), "needs: shard", "needs: nosuchjob", 1)
	assert.NotEmpty(t, lint(t, []byte(broken)))
}

func TestCIOptionsRefused(t *testing.T) {
	_, err := GitHubWorkflow(ciOptions(t, ".c", 5))
	assert.ErrorContains(t, err, "5 shards for a plan of 4 stages")
	_, err = GitHubWorkflow(ciOptions(t, "", 2))
	assert.ErrorContains(t, err, "a cache is required")
	_, _, err = KubernetesJobs(ciOptions(t, ".c", 2))
	assert.ErrorContains(t, err, "container image")
}

func TestKubernetesJobs(t *testing.T) {
	o := ciOptions(t, "oci://registry.example.com/ml/cache", 3)
	o.Image, o.PVC, o.SDK, o.Name = "registry.example.com/ml/qnnprep:1", "qnnprep-work", "/opt/qairt/2.40.0", "tiny"
	shards, asm, err := KubernetesJobs(o)
	require.NoError(t, err)

	var sj, aj batchv1.Job
	require.NoError(t, sigsyaml.UnmarshalStrict(shards, &sj), "%s", shards)
	require.NoError(t, sigsyaml.UnmarshalStrict(asm, &aj), "%s", asm)

	require.NotNil(t, sj.Spec.CompletionMode)
	assert.Equal(t, batchv1.IndexedCompletion, *sj.Spec.CompletionMode)
	assert.Equal(t, int32(3), *sj.Spec.Completions)
	assert.Equal(t, int32(3), *sj.Spec.Parallelism)
	require.NotNil(t, sj.Spec.BackoffLimitPerIndex, "a failed shard is retried alone")
	assert.Equal(t, "tiny-shards", sj.Name)
	pod := sj.Spec.Template.Spec
	assert.Equal(t, "Never", string(pod.RestartPolicy))
	c := pod.Containers[0]
	assert.Equal(t, o.Image, c.Image)
	assert.Equal(t, []string{"qnnprep", "bundle", "build"}, c.Command[:3])
	cmd := strings.Join(c.Command, " ")
	assert.Contains(t, cmd, "--shard-count 3")
	assert.Contains(t, cmd, "--out shards/$(JOB_COMPLETION_INDEX)/bundle", "each shard its own work directory")
	assert.Contains(t, cmd, "--cache "+o.Cache)
	assert.Equal(t, "QNN_SDK_ROOT", c.Env[0].Name)
	assert.Equal(t, o.SDK, c.Env[0].Value)
	assert.Equal(t, K8sMount, c.VolumeMounts[0].MountPath)
	assert.Equal(t, "qnnprep-work", pod.Volumes[0].PersistentVolumeClaim.ClaimName)

	assert.Equal(t, "tiny-assemble", aj.Name)
	assert.Nil(t, aj.Spec.CompletionMode)
	ac := aj.Spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"sh", "-c"}, ac.Command[:2])
	assert.Contains(t, ac.Command[2], "qnnprep bundle assemble --plan models/tiny/plan.json")
	assert.Contains(t, ac.Command[2], "--shard-count 3")
	assert.Contains(t, ac.Command[2], "&& qnnprep bundle pack bundle bundle.tar.zst")

	// Strict decoding does refuse a field batch/v1 does not have.
	bad := strings.Replace(string(shards), "completionMode:", "completionModes:", 1)
	assert.Error(t, sigsyaml.UnmarshalStrict([]byte(bad), &sj))
}
