package scaleout

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/qnnprep/qnnprep/internal/shellword"
	"github.com/qnnprep/qnnprep/shard"
)

// CIOptions describe the build the emitted CI files run: paths are as the
// jobs see them (relative to the repository checkout on GitHub, to the
// mounted volume on Kubernetes).
type CIOptions struct {
	Plan                    *shard.Plan
	PlanPath, Model, Graphs string
	Shards                  int
	// Cache is the --cache the jobs share: oci://HOST/REPO, or a
	// directory (on GitHub carried between jobs by actions/cache, on
	// Kubernetes on the shared volume).
	Cache string
	SoC   string

	// GitHub Actions.
	RunsOn  string // runner label; "" means ubuntu-latest
	Version string // qnnprep version go install takes; "" means latest

	// Kubernetes.
	Image  string // container image with qnnprep and the SDK
	PVC    string // ReadWriteMany claim holding the inputs, work and cache; mounted at /work
	SDK    string // QNN_SDK_ROOT in the image
	Name   string // Job name prefix; "" means qnnprep
	Bundle string // pack written by the assemble job; "" means bundle.tar.zst
}

func (o *CIOptions) check() error {
	if o.Plan == nil || o.PlanPath == "" || o.Model == "" || o.Graphs == "" {
		return fmt.Errorf("ci: the plan, model and graphs paths are required")
	}
	if _, err := Owners(o.Plan, o.Shards); err != nil {
		return err
	}
	if o.Cache == "" {
		return fmt.Errorf("ci: a cache is required: the shards and the assemble job meet there")
	}
	if o.SoC == "" {
		return fmt.Errorf("ci: a SoC is required")
	}
	return nil
}

func (o *CIOptions) bundle() string {
	if o.Bundle == "" {
		return "bundle.tar.zst"
	}
	return o.Bundle
}

// stageLists gives each shard's stages, 1-based and comma-separated.
func (o *CIOptions) stageLists() []string {
	owners, _ := Owners(o.Plan, o.Shards)
	lists := make([][]string, o.Shards)
	for s, k := range owners {
		lists[k] = append(lists[k], strconv.Itoa(s+1))
	}
	out := make([]string, o.Shards)
	for i, l := range lists {
		out[i] = strings.Join(l, ",")
	}
	return out
}

// inputArgs are the flags every job gives qnnprep.
func (o *CIOptions) inputArgs() []string {
	return []string{"--plan", o.PlanPath, "--model", o.Model, "--graphs", o.Graphs, "--soc", o.SoC, "--cache", o.Cache}
}

// shellJoin quotes args for a POSIX shell; "${{ ... }}" expressions are
// left as they are for GitHub to substitute.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellWord(a)
	}
	return strings.Join(q, " ")
}

// shellWord quotes s for the shell, leaving a GitHub Actions expression
// (${{ ... }}) for the runner to expand.
func shellWord(s string) string {
	if strings.HasPrefix(s, "${{") && strings.HasSuffix(s, "}}") {
		return s
	}
	return shellword.Quote(s)
}

func encodeYAML(docs ...any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// GitHub Actions workflow, only the keys qnnprep writes, in the order
// people read them.
type (
	ghWorkflow struct {
		Name        string            `yaml:"name"`
		On          map[string]any    `yaml:"on"`
		Permissions map[string]string `yaml:"permissions"`
		Env         map[string]string `yaml:"env,omitempty"`
		Jobs        ghJobs            `yaml:"jobs"`
	}
	ghJobs struct {
		Shard    ghJob `yaml:"shard"`
		Assemble ghJob `yaml:"assemble"`
	}
	ghJob struct {
		Name     string      `yaml:"name"`
		Needs    string      `yaml:"needs,omitempty"`
		RunsOn   string      `yaml:"runs-on"`
		Strategy *ghStrategy `yaml:"strategy,omitempty"`
		Steps    []ghStep    `yaml:"steps"`
	}
	ghStrategy struct {
		FailFast bool                `yaml:"fail-fast"`
		Matrix   map[string][]ghCell `yaml:"matrix"`
	}
	ghCell struct {
		Shard  int    `yaml:"shard"`
		Stages string `yaml:"stages"`
	}
	ghStep struct {
		Name string            `yaml:"name,omitempty"`
		Uses string            `yaml:"uses,omitempty"`
		With map[string]any    `yaml:"with,omitempty"`
		Env  map[string]string `yaml:"env,omitempty"`
		Run  string            `yaml:"run,omitempty"`
	}
)

// localCache is where a directory cache lives in a GitHub job.
const ghCacheKey = "qnnprep-cache-${{ hashFiles(%s) }}-shard-%s"

// GitHubWorkflow writes a GitHub Actions workflow that builds o's plan
// as a matrix of o.Shards jobs (each 'qnnprep bundle build --shard
// I/N'), then one assemble job that writes the bundle from the cache,
// packs it and uploads the pack as the workflow's artifact. The SDK is
// taken from the runner's QNN_SDK_ROOT (the repository variable of that
// name). An oci:// cache is reached with docker login (GITHUB_TOKEN for
// ghcr.io, else the QNNPREP_REGISTRY_USER and QNNPREP_REGISTRY_TOKEN
// secrets); a directory cache travels through actions/cache, one entry
// per shard, all restored by the assemble job.
func GitHubWorkflow(o CIOptions) ([]byte, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	runsOn := o.RunsOn
	if runsOn == "" {
		runsOn = "ubuntu-latest"
	}
	version := o.Version
	if version == "" {
		version = "latest"
	}
	setup := []ghStep{
		{Uses: "actions/checkout@v4", With: map[string]any{"lfs": true}},
		{Uses: "actions/setup-go@v5", With: map[string]any{"go-version": "1.26"}},
		{Name: "Install qnnprep", Run: "go install github.com/qnnprep/qnnprep/cmd/qnnprep@" + version},
	}
	perms := map[string]string{"contents": "read"}
	oci, isOCI := strings.CutPrefix(o.Cache, "oci://")
	if isOCI {
		host, _, _ := strings.Cut(oci, "/")
		login := ghStep{Name: "Log in to " + host,
			Run: fmt.Sprintf(`echo "$REGISTRY_TOKEN" | docker login %s -u "$REGISTRY_USER" --password-stdin`, shellWord(host))}
		if host == "ghcr.io" {
			perms["packages"] = "write"
			login.Env = map[string]string{"REGISTRY_USER": "${{ github.actor }}", "REGISTRY_TOKEN": "${{ secrets.GITHUB_TOKEN }}"}
		} else {
			login.Env = map[string]string{"REGISTRY_USER": "${{ secrets.QNNPREP_REGISTRY_USER }}", "REGISTRY_TOKEN": "${{ secrets.QNNPREP_REGISTRY_TOKEN }}"}
		}
		setup = append(setup, login)
	}
	hashed := fmt.Sprintf("'%s', '%s/**'", o.PlanPath, strings.TrimSuffix(o.Graphs, "/"))
	n := strconv.Itoa(o.Shards)

	shardJob := ghJob{
		Name:     "shard ${{ matrix.shard }}/" + n + " (stages ${{ matrix.stages }})",
		RunsOn:   runsOn,
		Strategy: &ghStrategy{FailFast: false, Matrix: map[string][]ghCell{"include": nil}},
		Steps:    append([]ghStep{}, setup...),
	}
	for i, st := range o.stageLists() {
		shardJob.Strategy.Matrix["include"] = append(shardJob.Strategy.Matrix["include"], ghCell{Shard: i, Stages: st})
	}
	if !isOCI {
		shardJob.Steps = append(shardJob.Steps, ghStep{Name: "Cache of this shard's stages", Uses: "actions/cache@v4",
			With: map[string]any{"path": o.Cache, "key": fmt.Sprintf(ghCacheKey, hashed, "${{ matrix.shard }}")}})
	}
	shardJob.Steps = append(shardJob.Steps, ghStep{Name: "Build this shard's stages",
		Run: "qnnprep " + shellJoin(append([]string{"bundle", "build"}, append(o.inputArgs(), "--out", "bundle", "--shard", "${{ matrix.shard }}/"+n)...))})

	asm := ghJob{Name: "assemble", Needs: "shard", RunsOn: runsOn, Steps: append([]ghStep{}, setup...)}
	if !isOCI {
		for i := range o.Shards {
			asm.Steps = append(asm.Steps, ghStep{Name: fmt.Sprintf("Restore shard %d's stages", i), Uses: "actions/cache/restore@v4",
				With: map[string]any{"path": o.Cache, "key": fmt.Sprintf(ghCacheKey, hashed, strconv.Itoa(i)), "fail-on-cache-miss": true}})
		}
	}
	asm.Steps = append(asm.Steps,
		ghStep{Name: "Assemble the bundle", Run: "qnnprep " + shellJoin(append([]string{"bundle", "assemble"}, append(o.inputArgs(), "--out", "bundle", "--shard-count", n)...))},
		ghStep{Name: "Pack it", Run: "qnnprep " + shellJoin([]string{"bundle", "pack", "bundle", o.bundle()})},
		ghStep{Name: "Upload the pack", Uses: "actions/upload-artifact@v4", With: map[string]any{"name": "qnnprep-bundle", "path": o.bundle(), "if-no-files-found": "error"}},
	)
	wf := ghWorkflow{
		Name:        "qnnprep bundle",
		On:          map[string]any{"workflow_dispatch": map[string]any{}},
		Permissions: perms,
		Env:         map[string]string{"QNN_SDK_ROOT": "${{ vars.QNN_SDK_ROOT }}"},
		Jobs:        ghJobs{Shard: shardJob, Assemble: asm},
	}
	return encodeYAML(wf)
}

// Kubernetes batch/v1 Jobs, only the fields qnnprep writes.
type (
	k8sJob struct {
		APIVersion string     `yaml:"apiVersion"`
		Kind       string     `yaml:"kind"`
		Metadata   k8sMeta    `yaml:"metadata"`
		Spec       k8sJobSpec `yaml:"spec"`
	}
	k8sMeta struct {
		Name   string            `yaml:"name,omitempty"`
		Labels map[string]string `yaml:"labels"`
	}
	k8sJobSpec struct {
		CompletionMode       string      `yaml:"completionMode,omitempty"`
		Completions          int         `yaml:"completions"`
		Parallelism          int         `yaml:"parallelism"`
		BackoffLimitPerIndex *int        `yaml:"backoffLimitPerIndex,omitempty"`
		BackoffLimit         *int        `yaml:"backoffLimit,omitempty"`
		Template             k8sTemplate `yaml:"template"`
	}
	k8sTemplate struct {
		Metadata k8sMeta `yaml:"metadata"`
		Spec     k8sPod  `yaml:"spec"`
	}
	k8sPod struct {
		RestartPolicy string         `yaml:"restartPolicy"`
		Containers    []k8sContainer `yaml:"containers"`
		Volumes       []k8sVolume    `yaml:"volumes"`
	}
	k8sContainer struct {
		Name         string     `yaml:"name"`
		Image        string     `yaml:"image"`
		WorkingDir   string     `yaml:"workingDir"`
		Command      []string   `yaml:"command"`
		Env          []k8sEnv   `yaml:"env,omitempty"`
		VolumeMounts []k8sMount `yaml:"volumeMounts"`
	}
	k8sEnv struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	}
	k8sMount struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	}
	k8sVolume struct {
		Name string   `yaml:"name"`
		PVC  k8sClaim `yaml:"persistentVolumeClaim"`
	}
	k8sClaim struct {
		ClaimName string `yaml:"claimName"`
	}
)

// K8sMount is where the Jobs mount the claim, and their working directory.
const K8sMount = "/work"

// KubernetesJobs writes two manifests: an Indexed Job of o.Shards
// completions, each pod building its shard (--shard-count with
// $JOB_COMPLETION_INDEX) in its own work directory, a failed index
// retried alone (backoffLimitPerIndex); and the assemble Job, to be
// created once the first has completed (kubectl wait
// --for=condition=complete), which assembles the bundle from the cache
// and packs it onto the volume. Both mount the claim o.PVC at /work.
func KubernetesJobs(o CIOptions) (shards, assemble []byte, err error) {
	if err := o.check(); err != nil {
		return nil, nil, err
	}
	if o.Image == "" || o.PVC == "" {
		return nil, nil, fmt.Errorf("ci: kubernetes needs a container image and a persistent volume claim")
	}
	name := o.Name
	if name == "" {
		name = "qnnprep"
	}
	labels := map[string]string{"app.kubernetes.io/name": "qnnprep", "app.kubernetes.io/instance": name}
	var env []k8sEnv
	if o.SDK != "" {
		env = []k8sEnv{{Name: "QNN_SDK_ROOT", Value: o.SDK}}
	}
	pod := func(container string, command []string) k8sPod {
		return k8sPod{
			RestartPolicy: "Never",
			Containers: []k8sContainer{{Name: container, Image: o.Image, WorkingDir: K8sMount, Command: command, Env: env,
				VolumeMounts: []k8sMount{{Name: "work", MountPath: K8sMount}}}},
			Volumes: []k8sVolume{{Name: "work", PVC: k8sClaim{ClaimName: o.PVC}}},
		}
	}
	n := strconv.Itoa(o.Shards)
	retries, none := 2, 0
	shardCmd := append([]string{"qnnprep", "bundle", "build"}, o.inputArgs()...)
	// $(VAR) is expanded by Kubernetes from the pod's environment, where
	// Indexed Jobs put JOB_COMPLETION_INDEX.
	shardCmd = append(shardCmd, "--out", "shards/$(JOB_COMPLETION_INDEX)/bundle", "--shard-count", n)
	sj := k8sJob{APIVersion: "batch/v1", Kind: "Job", Metadata: k8sMeta{Name: name + "-shards", Labels: labels},
		Spec: k8sJobSpec{CompletionMode: "Indexed", Completions: o.Shards, Parallelism: o.Shards, BackoffLimitPerIndex: &retries,
			Template: k8sTemplate{Metadata: k8sMeta{Labels: labels}, Spec: pod("shard", shardCmd)}}}
	script := "qnnprep " + shellJoin(append([]string{"bundle", "assemble"}, append(o.inputArgs(), "--out", "bundle", "--shard-count", n)...)) +
		" && qnnprep " + shellJoin([]string{"bundle", "pack", "bundle", o.bundle()})
	aj := k8sJob{APIVersion: "batch/v1", Kind: "Job", Metadata: k8sMeta{Name: name + "-assemble", Labels: labels},
		Spec: k8sJobSpec{Completions: 1, Parallelism: 1, BackoffLimit: &none,
			Template: k8sTemplate{Metadata: k8sMeta{Labels: labels}, Spec: pod("assemble", []string{"sh", "-c", script})}}}
	if shards, err = encodeYAML(sj); err != nil {
		return nil, nil, err
	}
	assemble, err = encodeYAML(aj)
	return shards, assemble, err
}
