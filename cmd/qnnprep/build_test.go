package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// synthQwen35 writes the synthetic hybrid Qwen3.5 (4 layers: 3 Gated
// DeltaNet, 1 gated attention) as a Hugging Face checkpoint.
// synthQwen35 and synthLlamaGGUF are 1-bit-native models, so q1 builds
// of them meet q1's default thresholds.
func synthQwen35(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "qwen35")
	if err := synth.WriteHFOneBit(dir, synth.Config(model.Qwen35, true), 3, 1); err != nil {
		t.Fatal(err)
	}
	return dir
}

func synthLlamaGGUF(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "llama.gguf")
	if err := synth.WriteGGUFOneBit(path, synth.Config(model.Llama, true), 3); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBuildDryRun: without an SDK, build writes the qmodel, plan, every
// graph's ONNX and encodings and the bundle's configs and manifest, prints
// the SDK commands (one converter run per graph, one context binary per
// stage) and the summary.
func TestBuildDryRun(t *testing.T) {
	src := synthQwen35(t)
	out := filepath.Join(t.TempDir(), "out")
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	var code int
	stdout := captureStdout(t, func() {
		code = run([]string{"build", src, out, "--recipe", "q1", "--stages", "2", "--ar", "32,1", "--cl", "256", "--soc", "8elite", "-n", "8", "-q", "--allow-recurrent-state"})
	})
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	// The hybrid's DeltaNet state is allowed, and the summary says what
	// the bundle then needs.
	if !strings.Contains(stdout, "needs a runtime that feeds the 12 past_conv/past_ssm tensors") {
		t.Errorf("summary does not say the bundle needs a state-feeding runtime:\n%s", stdout)
	}
	p, err := shard.ReadPlan(filepath.Join(out, "work", "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The plan is the one 'qnnprep plan' makes from the same qmodel.
	ref := filepath.Join(t.TempDir(), "plan.json")
	if code := run([]string{"plan", filepath.Join(out, "work", "qmodel.gguf"), "--name", "qwen35", "--stages", "2", "--ar", "32,1", "--cl", "256", "-o", ref}); code != 0 {
		t.Fatalf("plan exit %d", code)
	}
	a, _ := os.ReadFile(ref)
	b, _ := os.ReadFile(filepath.Join(out, "work", "plan.json"))
	if string(a) != string(b) {
		t.Error("build's plan differs from qnnprep plan's")
	}
	if len(p.Stages) != 2 || len(p.Graphs) != 4 {
		t.Fatalf("plan: %d stages, %d graphs", len(p.Stages), len(p.Graphs))
	}
	for _, g := range p.Graphs {
		for _, ext := range []string{".onnx", ".encodings.json"} {
			if _, err := os.Stat(filepath.Join(out, "work", "onnx", g.Name+ext)); err != nil {
				t.Error(err)
			}
		}
		if !strings.Contains(stdout, g.Name+".onnx") {
			t.Errorf("no SDK command converts %s", g.Name)
		}
	}
	for _, f := range []string{qnnpack.GenieConfigName, qnnpack.HTPExtConfigName, qnnpack.ManifestName, qnnpack.BundlePlanName} {
		if _, err := os.Stat(filepath.Join(out, "bundle", f)); err != nil {
			t.Error(err)
		}
	}
	if n := strings.Count(stdout, qnnpack.ToolConverter+" "); n != len(p.Graphs) {
		t.Errorf("%d converter commands, want %d", n, len(p.Graphs))
	}
	// The qmodel decoded through the plan's stages (runtime.Staged) gives
	// the whole-model tokens on the hybrid.
	if !regexp.MustCompile(`qmodel staged +[0-9.]+% +[0-9]+/[0-9]+ +[0-9]+/[0-9]+ +yes`).MatchString(stdout) {
		t.Errorf("no staged == whole row:\n%s", stdout)
	}
	if n := strings.Count(stdout, qnnpack.ToolCtxGen+" "); n != len(p.Stages) {
		t.Errorf("%d context binary commands, want %d", n, len(p.Stages))
	}
	for _, want := range []string{"quantize  ok", "sdk       dry-run", "verify    ok", "stage  layers", "qmodel whole", "result: PASS"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	// genie_config.json carries the HF config's BOS/EOS (1, 2) and CL.
	var g struct {
		Dialog struct {
			Context struct {
				BOS  int `json:"bos-token"`
				EOS  int `json:"eos-token"`
				Size int `json:"size"`
			}
		}
	}
	gb, _ := os.ReadFile(filepath.Join(out, "bundle", qnnpack.GenieConfigName))
	if err := json.Unmarshal(gb, &g); err != nil {
		t.Fatal(err)
	}
	if c := g.Dialog.Context; c.BOS != 1 || c.EOS != 2 || c.Size != 256 {
		t.Errorf("genie context %+v", c)
	}
	// --json prints the same Result as summary.json; --no-verify skips
	// the decode.
	stdout = captureStdout(t, func() {
		code = run([]string{"build", src, out, "--recipe", "q1", "--stages", "2", "--ar", "32,1", "--cl", "256", "--json", "--no-verify", "-q", "--allow-recurrent-state", "--container", "8bit"})
	})
	var res pipeline.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v in %q", err, stdout)
	}
	if code != 0 || res.Verify != nil || res.Step(pipeline.StepVerify).Status != pipeline.StatusSkipped || len(res.Commands) != len(p.Graphs)+len(p.Stages) {
		t.Errorf("--json --no-verify: exit %d, %s", code, stdout)
	}
	// --container 8bit: the plan is sized in it and the Q1_0 codes are
	// exported in 8 bits.
	p8, err := shard.ReadPlan(filepath.Join(out, "work", "plan.json"))
	if err != nil || p8.Container != shard.Container8Bit || p8.Stages[0].Bytes <= p.Stages[0].Bytes || p8.Stages[0].QModelBytes != p.Stages[0].QModelBytes {
		t.Errorf("--container 8bit plan: %v; stage 0 %+v, 4bit %+v", err, p8.Stages[0], p.Stages[0])
	}
	eb, _ := os.ReadFile(filepath.Join(out, "work", "onnx", p8.Graphs[0].Name+".encodings.json"))
	if !strings.Contains(string(eb), `"bw":8,"block_size":128`) || strings.Contains(string(eb), `"bw":4`) {
		t.Errorf("--container 8bit: Q1_0 encodings not 8-bit:\n%.300s", eb)
	}
	if want := shard.StateTensors(p); len(want) != 12 || !slices.Equal(res.RecurrentState, want) {
		t.Errorf("summary recurrent_state %v, want the plan's %v", res.RecurrentState, want)
	}
	mb, _ := os.ReadFile(filepath.Join(out, "bundle", qnnpack.ManifestName))
	if m, err := qnnpack.ParseManifest(mb, "manifest.json"); err != nil || !slices.Equal(m.RecurrentState, res.RecurrentState) || !strings.Contains(strings.Join(m.Notes, " "), "qnnprep's staged runtime") {
		t.Errorf("manifest does not list the recurrent state: %v\n%s", err, mb)
	}

	// Without --allow-recurrent-state the hybrid fails check, naming the rule.
	stderr := captureStderr(t, func() {
		captureStdout(t, func() {
			code = run([]string{"build", src, filepath.Join(t.TempDir(), "out2"), "--recipe", "q1", "--stages", "2", "--ar", "32,1", "--cl", "256", "--no-verify", "-q"})
		})
	})
	if code != 1 || !strings.Contains(stderr, "check: ") || !strings.Contains(stderr, shard.RuleRecurrent) {
		t.Errorf("hybrid without --allow-recurrent-state: exit %d, %s", code, stderr)
	}

	// A dry-run bundle has no context binaries: bundle verify says so.
	if code := run([]string{"bundle", "verify", filepath.Join(out, "bundle")}); code != 1 {
		t.Errorf("bundle verify of a dry run: exit %d, want 1", code)
	}
}

// TestBuildFakeSDK runs build against the fake SDK to a bundle that
// 'bundle verify' accepts, with one context binary per stage.
func TestBuildFakeSDK(t *testing.T) {
	src := synthLlamaGGUF(t)
	out := filepath.Join(t.TempDir(), "out")
	root := fakeSDKRoot(t)
	var code int
	stdout := captureStdout(t, func() {
		code = run([]string{"build", src, out, "--recipe", "int8", "--stages", "2", "--ar", "32,1", "--cl", "256", "--qnn-sdk", root, "-n", "8", "-q"})
	})
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	if strings.Contains(stdout, qnnpack.ToolConverter) {
		t.Error("printed SDK commands although the SDK ran")
	}
	if !strings.Contains(stdout, "sdk       ok") || !strings.Contains(stdout, "SDK 2.40.0.251030: 6 jobs run") {
		t.Errorf("summary:\n%s", stdout)
	}
	bundle := filepath.Join(out, "bundle")
	if code := run([]string{"bundle", "verify", bundle}); code != 0 {
		t.Fatalf("bundle verify exit %d", code)
	}
	m, err := qnnpack.VerifyBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	bins := 0
	for _, f := range m.Files {
		if strings.HasSuffix(f.Path, ".bin") {
			bins++
		}
	}
	if bins != 2 || m.DryRun || m.SoC != "8elite" {
		t.Errorf("manifest: %d context binaries, dry run %v, SoC %s", bins, m.DryRun, m.SoC)
	}
	var sum pipeline.Result
	sb, _ := os.ReadFile(filepath.Join(out, pipeline.SummaryName))
	if err := json.Unmarshal(sb, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.DryRun || sum.Step(pipeline.StepBundle).Status != pipeline.StatusOK {
		t.Errorf("summary.json: %s", sb)
	}

	// A second build finds every SDK job in its cache.
	stdout = captureStdout(t, func() {
		code = run([]string{"build", src, out, "--recipe", "int8", "--stages", "2", "--ar", "32,1", "--cl", "256", "--qnn-sdk", root, "-n", "8", "-q"})
	})
	if code != 0 || !strings.Contains(stdout, "0 jobs run, 6 up to date") {
		t.Errorf("rebuild exit %d:\n%s", code, stdout)
	}
}

// TestBuildErrorsNameStep: each failure is reported with the step it
// happened in, and exits 1 (2 for usage errors).
func TestBuildErrorsNameStep(t *testing.T) {
	src := synthLlamaGGUF(t)
	root := fakeSDKRoot(t)
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		code int
		want string
	}{
		{"missing model", []string{filepath.Join(t.TempDir(), "nope.gguf")}, nil, 1, "qnnprep build: quantize: "},
		{"too many stages", []string{src, "--stages", "9"}, nil, 1, "qnnprep build: plan: "},
		{"contract", []string{src, "--vtcm-mb", "4"}, nil, 1, "qnnprep build: check: "},
		{"converter fails", []string{src, "--qnn-sdk", root}, []string{"FAKESDK_FAIL", qnnpack.ToolConverter}, 1, "qnnprep build: sdk: "},
		{"bad sdk", []string{src, "--qnn-sdk", filepath.Join(t.TempDir(), "nosdk")}, nil, 1, "qnnprep build: sdk: "},
		{"no recipe", []string{src}, nil, 2, "--recipe is required"},
		{"bad soc", []string{src, "--soc", "8gen9"}, nil, 2, "--soc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != nil {
				t.Setenv(tc.env[0], tc.env[1])
			}
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"build", out}, tc.args...)
			if tc.code != 2 {
				args = append(args, "--recipe", "q1")
			}
			args = append(args, "--ar", "32,1", "--cl", "256", "-n", "4", "-q")
			// MODEL first, OUTDIR second.
			args[1], args[2] = args[2], args[1]
			var code int
			stderr := captureStderr(t, func() {
				captureStdout(t, func() { code = run(args) })
			})
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.want)
			}
			if _, err := os.Stat(filepath.Join(out, "bundle")); !os.IsNotExist(err) {
				t.Error("a failed build left a bundle")
			}
		})
	}
}

// TestBuildInterrupted: SIGINT while the SDK tools run leaves no bundle,
// no temporary file and no tool process, and exits 130.
func TestBuildInterrupted(t *testing.T) {
	src := synthLlamaGGUF(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	pids := filepath.Join(dir, "pids")
	os.Mkdir(pids, 0o755)
	args := []string{"build", src, out, "--recipe", "q1", "--stages", "2", "--ar", "32,1", "--cl", "256", "-q"}
	interruptFakeSDKRun(t, args, pids, 60*time.Second)
	if _, err := os.Stat(filepath.Join(out, "bundle")); !os.IsNotExist(err) {
		t.Errorf("interrupted build left a bundle")
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && (strings.Contains(d.Name(), ".tmp-") || strings.HasSuffix(p, ".dlc") || strings.HasSuffix(p, ".bin")) {
			t.Errorf("interrupted build left %s", p)
		}
		return nil
	})
	// The finished steps' outputs stay; the summary names the step.
	var sum pipeline.Result
	sb, err := os.ReadFile(filepath.Join(out, pipeline.SummaryName))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(sb, &sum)
	if s := sum.Step(pipeline.StepSDK); s == nil || s.Status != pipeline.StatusFailed {
		t.Errorf("summary: %s", sb)
	}
}

// TestBuildSPDFakeSDK: an spd build compiles the draft too and bundles its
// context binary under draft/; the speculative CPU decode matches greedy.
func TestBuildSPDFakeSDK(t *testing.T) {
	src := synthLlamaGGUF(t)
	cfg := synth.Config(model.Llama, true)
	cfg.Layers, cfg.LayerKinds = 1, cfg.LayerKinds[:1]
	draft := filepath.Join(t.TempDir(), "draft.gguf")
	if err := synth.WriteGGUF(draft, cfg, 5, gguf.F32); err != nil {
		t.Fatal(err)
	}
	root := fakeSDKRoot(t)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	for _, sdk := range []string{"fake", "none"} {
		out := filepath.Join(t.TempDir(), "out")
		args := []string{"build", src, out, "--recipe", "q1", "--stages", "2", "--ar", "32,1", "--cl", "256",
			"--dialog", "spd", "--draft-len", "3", "--draft", draft, "-n", "8", "-q"}
		if sdk == "fake" {
			args = append(args, "--qnn-sdk", root)
		}
		var code int
		stdout := captureStdout(t, func() { code = run(args) })
		if code != 0 {
			t.Fatalf("%s SDK: exit %d\n%s", sdk, code, stdout)
		}
		if !strings.Contains(stdout, "qmodel speculative (draft)") || !strings.Contains(stdout, "draft     ") {
			t.Errorf("%s SDK: summary:\n%s", sdk, stdout)
		}
		bundle := filepath.Join(out, "bundle")
		verify := qnnpack.VerifyBundle
		if sdk == "none" {
			verify = qnnpack.VerifyBundleFiles // a dry run's bundle has no binaries
		}
		m, err := verify(bundle)
		if err != nil {
			t.Fatalf("%s SDK: %v", sdk, err)
		}
		// The draft's plan and both engines' config are in the bundle;
		// its context binaries too when the SDK made them.
		dp, err := shard.ReadPlan(filepath.Join(bundle, qnnpack.BundleDraftPlanName))
		if err != nil {
			t.Fatal(err)
		}
		genie, err := os.ReadFile(filepath.Join(bundle, qnnpack.GenieConfigName))
		if err != nil {
			t.Fatal(err)
		}
		bin := "draft/" + qnnpack.ContextBinaryName(dp, 0) + ".bin"
		if !strings.Contains(string(genie), `"role": "draft"`) || !strings.Contains(string(genie), bin) {
			t.Errorf("%s SDK: genie_config.json has no draft engine over %s:\n%s", sdk, bin, genie)
		}
		found := false
		for _, f := range m.Files {
			found = found || f.Path == bin
		}
		if found != (sdk == "fake") {
			t.Errorf("%s SDK: draft context binary in the bundle: %v", sdk, found)
		}
	}
}

// TestBuildDryRunScript: the dry run's sdk_commands.sh, run by a shell
// with QNN_SDK_ROOT set, compiles every stage (with the fake SDK's tools).
func TestBuildDryRunScript(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	src := synthLlamaGGUF(t)
	out := filepath.Join(t.TempDir(), "out")
	runOK(t, "build", src, out, "--recipe", "q1", "--stages", "2", "--ar", "32,1", "--cl", "256", "--dry-run", "-n", "4", "-q")
	root := fakeSDKRoot(t)
	cmd := exec.Command(sh, filepath.Join(out, "work", pipeline.CommandsName))
	cmd.Env = append(os.Environ(), "QNN_SDK_ROOT="+root)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	p, err := shard.ReadPlan(filepath.Join(out, "work", "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Stages {
		bin := filepath.Join(out, "work", "sdk", "stage_0"+strconv.Itoa(i+1), qnnpack.ContextBinaryName(p, i)+".bin")
		if b, err := os.ReadFile(bin); err != nil || !strings.HasPrefix(string(b), "FAKECTX1\n") {
			t.Errorf("%s: %v", bin, err)
		}
	}
}

// TestBuildTokenizer: a source with no tokenizer fails before quantizing,
// naming --tokenizer; with --tokenizer the bundle carries a tokenizer.json
// written from that vocabulary.
func TestBuildTokenizer(t *testing.T) {
	src := filepath.Join(t.TempDir(), "hf")
	if err := synth.WriteHF(src, synth.Config(model.Llama, true), 3, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, qnnpack.TokenizerName)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"build", src, out, "--recipe", "q1", "--stages", "2", "--ar", "32,1", "--cl", "256", "--no-verify", "-q"}
	var code int
	var stderr string
	captureStdout(t, func() { stderr = captureStderr(t, func() { code = run(args) }) })
	if code != 1 || !strings.Contains(stderr, "give the model's tokenizer with --tokenizer FILE") {
		t.Fatalf("build without a tokenizer: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "work", pipeline.QModelName)); err == nil {
		t.Error("qmodel written although the build had no tokenizer")
	}
	vocab := synthLlamaGGUF(t)
	captureStdout(t, func() { stderr = captureStderr(t, func() { code = run(append(args, "--tokenizer", vocab)) }) })
	if code != 0 {
		t.Fatalf("build --tokenizer: exit %d\n%s", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "bundle", qnnpack.TokenizerName))
	if err != nil {
		t.Fatal(err)
	}
	v, err := tokenizer.ParseHF(data)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := synth.VocabMetadata(512)
	want, err := tokenizer.FromGGUF(md)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Tokens, want.Tokens) {
		t.Error("bundle tokenizer.json does not hold --tokenizer's vocabulary")
	}
}

// TestBuildThresholds: build holds the qmodel to its recipe's default
// thresholds and prints them; each threshold flag replaces its default,
// and a verdict that fails names the threshold.
func TestBuildThresholds(t *testing.T) {
	src := synthLlamaGGUF(t)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	for _, c := range []struct {
		flags []string
		code  int
		want  []string
	}{
		{nil, 0, []string{"thresholds: min-match 0.000, min-top1 0.500, min-cosine 0.9995, degeneration fails (default for recipe int8 against its source)", "result: PASS"}},
		{[]string{"--min-match", "1", "--min-top1", "1", "--min-cosine", "1", "--fail-on-degeneration=false"}, 1, []string{
			"thresholds: min-match 1.000, min-top1 1.000, min-cosine 1.0000, degeneration ignored (default for recipe int8 against its source; min-match, min-top1, min-cosine, fail-on-degeneration given)",
			"below min-cosine 1.0000", "result: FAIL"}},
	} {
		out := filepath.Join(t.TempDir(), "out")
		var code int
		stdout := captureStdout(t, func() {
			code = run(append([]string{"build", src, out, "--recipe", "int8", "--stages", "1", "--ar", "32,1", "--cl", "128", "--dry-run", "-n", "8", "-q", "--calibrate", "0"}, c.flags...))
		})
		if code != c.code {
			t.Fatalf("%v: exit %d, want %d\n%s", c.flags, code, c.code, stdout)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: output lacks %q:\n%s", c.flags, w, stdout)
			}
		}
	}
}
