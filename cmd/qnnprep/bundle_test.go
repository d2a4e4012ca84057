package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
	"github.com/qnnprep/qnnprep/tokenizer"
)

func TestMain(m *testing.M) { os.Exit(fakesdk.Main(m)) }

// fakeSDKRoot lays out the fake SDK (testkit/fakesdk).
func fakeSDKRoot(t *testing.T) string { return fakesdk.Root(t) }

// storiesBundleInputs plans stories260K in two stages (planArgs are added
// to plan's flags) and writes a small ONNX graph and encodings per graph;
// it returns the plan file and the graphs directory.
func storiesBundleInputs(t *testing.T, dir string, planArgs ...string) (string, string) {
	t.Helper()
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	planPath := filepath.Join(dir, "plan.json")
	if code := run(append([]string{"plan", storiesGGUF, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", planPath}, planArgs...)); code != 0 {
		t.Fatalf("plan exit %d", code)
	}
	p, err := shard.ReadPlan(planPath)
	if err != nil {
		t.Fatal(err)
	}
	graphs := filepath.Join(dir, "graphs")
	os.Mkdir(graphs, 0o755)
	for _, g := range p.Graphs {
		og := onnx.NewGraph(g.Name)
		in := og.Input(g.Inputs[0].Name, onnx.Float, g.Inputs[0].Shape...)
		for _, o := range g.Outputs {
			og.Output(o.Name, onnx.Float, o.Shape...)
			og.Node("Identity", []string{in}, []string{o.Name})
		}
		if err := og.WriteFile(filepath.Join(graphs, g.Name+".onnx"), onnx.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(graphs, g.Name+".encodings"), []byte(`{"activation_encodings":{},"param_encodings":{}}`), 0o644)
	}
	return planPath, graphs
}

func TestBundleBuildAndVerifyCommands(t *testing.T) {
	dir := t.TempDir()
	planPath, graphs := storiesBundleInputs(t, dir)
	out := filepath.Join(dir, "bundle")
	root := fakeSDKRoot(t)
	t.Setenv("QNN_SDK_ROOT", root)
	for _, a := range [][]string{{"sdk"}, {"sdk", "--json"}, {"sdk", "--qnn-sdk", root}} {
		if code := run(a); code != 0 {
			t.Errorf("%v: exit %d", a, code)
		}
	}
	if code := run([]string{"sdk", "--qnn-sdk", filepath.Join(dir, "nope")}); code != 1 {
		t.Errorf("sdk with a missing root: exit %d, want 1", code)
	}
	args := []string{"bundle", "build", "--plan", planPath, "--model", storiesGGUF, "--graphs", graphs, "--out", out, "--soc", "8gen3"}
	if code := run(args); code != 0 {
		t.Fatalf("bundle build exit %d", code)
	}
	if code := run([]string{"bundle", "verify", out}); code != 0 {
		t.Fatalf("bundle verify exit %d", code)
	}

	// Without --tokenizer, tokenizer.json is written from the qmodel's
	// vocabulary; --tokenizer FILE puts that file in instead.
	written, err := os.ReadFile(filepath.Join(out, qnnpack.TokenizerName))
	if err != nil {
		t.Fatal(err)
	}
	v, err := tokenizer.ParseHF(written)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Tokens) != 512 || !v.AddBOS || v.BOS != 1 {
		t.Errorf("written tokenizer.json: %d tokens, AddBOS %v, BOS %d", len(v.Tokens), v.AddBOS, v.BOS)
	}
	v.AddBOS = false
	custom, err := tokenizer.WriteHF(v)
	if err != nil {
		t.Fatal(err)
	}
	customPath := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(customPath, custom, 0o644)
	out2 := filepath.Join(dir, "bundle2")
	if code := run(append(args[:len(args):len(args)], "--out", out2, "--tokenizer", customPath)); code != 0 {
		t.Fatalf("bundle build --tokenizer exit %d", code)
	}
	if got, _ := os.ReadFile(filepath.Join(out2, qnnpack.TokenizerName)); !bytes.Equal(got, custom) || bytes.Equal(custom, written) {
		t.Error("bundle build --tokenizer did not put the given tokenizer.json in the bundle")
	}

	// genie_config.json carries stories260K's facts (fixtures README):
	// BOS 1, EOS 2, vocab 512, head size 8 (rope-dim 4), theta 10000, and
	// the plan's CL 128.
	var g struct {
		Dialog struct {
			Context struct {
				BOS    int `json:"bos-token"`
				EOS    int `json:"eos-token"`
				Size   int `json:"size"`
				NVocab int `json:"n-vocab"`
			}
			Engine struct {
				Model struct {
					Binary struct {
						CtxBins []string `json:"ctx-bins"`
					}
					Pos struct {
						RopeDim   int     `json:"rope-dim"`
						RopeTheta float64 `json:"rope-theta"`
					} `json:"positional-encoding"`
				}
			}
		}
	}
	b, _ := os.ReadFile(filepath.Join(out, qnnpack.GenieConfigName))
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	c := g.Dialog.Context
	pos := g.Dialog.Engine.Model.Pos
	if c.BOS != 1 || c.EOS != 2 || c.NVocab != 512 || c.Size != 128 || pos.RopeDim != 4 || pos.RopeTheta != 10000 {
		t.Errorf("genie config %s", b)
	}
	if bins := g.Dialog.Engine.Model.Binary.CtxBins; len(bins) != 2 || bins[0] != "llama_01_of_02.bin" || bins[1] != "llama_02_of_02.bin" {
		t.Errorf("ctx-bins %v", bins)
	}

	// A flipped byte makes verify fail with exit 1.
	bin := filepath.Join(out, "llama_02_of_02.bin")
	data, _ := os.ReadFile(bin)
	data[len(data)/2] ^= 4
	os.WriteFile(bin, data, 0o644)
	if code := run([]string{"bundle", "verify", out}); code != 1 {
		t.Errorf("verify of a changed bundle: exit %d, want 1", code)
	}
	if code := run([]string{"bundle", "frobnicate"}); code != 2 {
		t.Errorf("unknown subcommand: exit %d, want 2", code)
	}
}

// TestHelperQnnprep is not a test: TestBundleBuildInterrupted runs the test
// binary as qnnprep through it, so a real SIGINT reaches main's handler.
func TestHelperQnnprep(t *testing.T) {
	args := os.Getenv("QNNPREP_HELPER_ARGS")
	if args == "" {
		t.Skip("helper process only")
	}
	var list []string
	if err := json.Unmarshal([]byte(args), &list); err != nil {
		t.Fatal(err)
	}
	os.Exit(run(list))
}

func TestBundleBuildInterrupted(t *testing.T) {
	dir := t.TempDir()
	planPath, graphs := storiesBundleInputs(t, dir)
	out := filepath.Join(dir, "bundle")
	pids := filepath.Join(dir, "pids")
	os.Mkdir(pids, 0o755)
	args := []string{"bundle", "build", "--plan", planPath, "--model", storiesGGUF, "--graphs", graphs, "--out", out, "--soc", "8elite"}
	interruptFakeSDKRun(t, args, pids, 30*time.Second)
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("interrupted build left %s", out)
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && (strings.Contains(d.Name(), ".tmp-") || strings.HasSuffix(p, ".dlc") || strings.HasSuffix(p, ".bin")) {
			t.Errorf("interrupted build left %s", p)
		}
		return nil
	})
}

// TestBundleFromExport runs the pipeline the way 'qnnprep build' will:
// quantize stories260K to INT8, plan, export every graph with 'qnnprep
// export onnx', then 'bundle build' (fake SDK) and 'bundle verify'. It
// proves the exporter's files are what the SDK driver expects (names,
// external data, encodings, I/O names for --preserve_io_datatype).
func TestBundleFromExport(t *testing.T) {
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	dir := t.TempDir()
	q := filepath.Join(dir, "int8.gguf")
	plan := filepath.Join(dir, "plan.json")
	graphs := filepath.Join(dir, "onnx")
	out := filepath.Join(dir, "bundle")
	t.Setenv("QNN_SDK_ROOT", fakeSDKRoot(t))
	for _, args := range [][]string{
		{"quantize", storiesGGUF, q, "--recipe", "int8"},
		{"plan", q, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", plan},
		{"export", "onnx", plan, q, graphs, "-q", "--external"},
		{"bundle", "build", "--plan", plan, "--model", q, "--graphs", graphs, "--out", out, "--soc", "8elite"},
		{"bundle", "verify", out},
	} {
		if code := run(args); code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
	}
	p, err := shard.ReadPlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	// The converter got each graph's external data as a cache input: the
	// job list names it.
	files, err := qnnpack.FindGraphFiles(p, graphs)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _, err := qnnpack.PlanJobs(qnnpack.DryRunSDK(), p, files, filepath.Join(dir, "w"))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Tool == qnnpack.ToolConverter && (len(j.Inputs) != 3 || filepath.Ext(j.Inputs[2]) != ".data") {
			t.Errorf("%s: inputs %v", j.Name(), j.Inputs)
		}
	}
}

// interruptFakeSDKRun runs qnnprep with args in a child process against the
// fake SDK (whose tools sleep and spawn children, recording their pids in
// pids), sends SIGINT once four tool processes run, and requires exit 130
// with every tool process gone.
func interruptFakeSDKRun(t *testing.T, args []string, pids string, startTimeout time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperQnnprep$")
	argsJSON, _ := json.Marshal(args)
	cmd.Env = append(os.Environ(),
		"QNNPREP_HELPER_ARGS="+string(argsJSON),
		"QNN_SDK_ROOT="+fakeSDKRoot(t),
		"FAKESDK_SLEEP=60s", "FAKESDK_SPAWN=1", "FAKESDK_PIDS="+pids)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		if ents, _ := os.ReadDir(pids); len(ents) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("tools did not start; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("qnnprep did not exit after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit code %d, want 130; stderr:\n%s", code, stderr.String())
	}
	ents, _ := os.ReadDir(pids)
	for _, e := range ents {
		pid, _ := strconv.Atoi(e.Name())
		gone := false
		for i := 0; i < 200 && !gone; i++ {
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			gone = err != nil || strings.Contains(string(b[strings.LastIndexByte(string(b), ')'):]), ") Z ")
			if !gone {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if !gone {
			t.Errorf("process %d survived SIGINT", pid)
		}
	}
}

// bundle build refuses a hybrid plan (GENIE-RECURRENT-STATE) unless
// --allow-recurrent-state is given; then the manifest lists the state the
// bundle's runtime must feed back.
func TestBundleBuildRecurrentState(t *testing.T) {
	dir := t.TempDir()
	q := filepath.Join(dir, "q.gguf")
	plan := filepath.Join(dir, "plan.json")
	graphs := filepath.Join(dir, "onnx")
	out := filepath.Join(dir, "bundle")
	src := synthQwen35(t)
	captureStdout(t, func() {
		for _, args := range [][]string{
			{"quantize", src, q, "--recipe", "int8"},
			{"plan", q, "--stages", "1", "--ar", "4", "--cl", "32", "-o", plan},
			{"export", "onnx", plan, q, graphs, "-q", "--force"},
		} {
			if code := run(args); code != 0 {
				t.Fatalf("%v: exit %d", args, code)
			}
		}
	})
	// --model is the qmodel the plan was sized for (the HF source's stages
	// weigh more, and bundle build refuses it); quantize copied the
	// source's BOS and EOS into it, which genie_config.json needs.
	build := []string{"bundle", "build", "--plan", plan, "--model", q, "--graphs", graphs, "--out", out, "--soc", "8elite", "--dry-run",
		"--tokenizer", filepath.Join(src, "tokenizer.json")}
	var code int
	stderr := captureStderr(t, func() { captureStdout(t, func() { code = run(build) }) })
	if code != 1 || !strings.Contains(stderr, shard.RuleRecurrent) {
		t.Fatalf("without --allow-recurrent-state: exit %d, %s", code, stderr)
	}
	stderr = captureStderr(t, func() { captureStdout(t, func() { code = run(append(build, "--allow-recurrent-state")) }) })
	if code != 0 {
		t.Fatalf("with --allow-recurrent-state: exit %d, %s", code, stderr)
	}
	p, err := shard.ReadPlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(out, qnnpack.ManifestName))
	m, err := qnnpack.ParseManifest(b, "manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := shard.StateTensors(p); len(want) == 0 || !slices.Equal(m.RecurrentState, want) || !strings.Contains(strings.Join(m.Notes, " "), "needs a runtime that feeds") {
		t.Errorf("manifest recurrent_state %v notes %q, want %v", m.RecurrentState, m.Notes, want)
	}
}
