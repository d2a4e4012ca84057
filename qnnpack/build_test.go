package qnnpack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

type buildEnv struct {
	sdk   *SDK
	plan  *shard.Plan
	files map[string]GraphFiles
	in    string // exported graphs
	out   string // bundle
	calls string // fake SDK call log
}

func newBuildEnv(t *testing.T, opts shard.Options) *buildEnv {
	t.Helper()
	return newBuildEnvFor(t, opts, LinuxX64)
}

// newBuildEnvFor is newBuildEnv with the fake SDK laid out for host h.
func newBuildEnvFor(t *testing.T, opts shard.Options, h Host) *buildEnv {
	t.Helper()
	root := fakeSDKFor(t, h)
	sdk, err := FindSDKFor(root, h)
	if err != nil {
		t.Fatal(err)
	}
	e := &buildEnv{sdk: sdk, in: t.TempDir(), out: filepath.Join(t.TempDir(), "bundle")}
	e.plan = testPlan(t, fakesdk.ModelConfig(4), "tiny", opts)
	e.files = writeGraphs(t, e.plan, e.in)
	e.calls = filepath.Join(t.TempDir(), "calls.jsonl")
	t.Setenv("FAKESDK_CALLS", e.calls)
	// genie_config.json names tokenizer.json: a bundle that verifies has one.
	if err := os.WriteFile(filepath.Join(e.in, "tokenizer.json"), []byte(`{"model":{"type":"BPE"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *buildEnv) options() BuildOptions {
	return BuildOptions{
		SDK: e.sdk, Plan: e.plan, Config: fakesdk.ModelConfig(4), Graphs: e.files, OutDir: e.out,
		SoC: "8elite", QnnprepVersion: "test", Recipe: json.RawMessage(`{"weights":"Q1_0"}`),
		Tokenizer: filepath.Join(e.in, "tokenizer.json"),
	}
}

// TestBuildRunsEveryJobThenCaches runs with the fake SDK laid out for
// every build-machine layout (Linux, x86-64 and ARM64 Windows).
func TestBuildRunsEveryJobThenCaches(t *testing.T) {
	for _, h := range Hosts {
		t.Run(h.Dir, func(t *testing.T) { testBuildRunsEveryJobThenCaches(t, h) })
	}
}

func testBuildRunsEveryJobThenCaches(t *testing.T, h Host) {
	e := newBuildEnvFor(t, shard.Options{}, h)
	tok := filepath.Join(e.in, "tokenizer.json")
	os.WriteFile(tok, []byte(`{"model":{"type":"BPE"}}`), 0o644)
	o := e.options()
	o.Tokenizer = tok
	res, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}

	// Every job ran once: a converter per graph, a context job per stage.
	got := fakesdk.Calls(t, e.calls)
	if want := len(e.plan.Graphs) + len(e.plan.Stages); len(got) != want {
		t.Fatalf("%d tool runs, want %d", len(got), want)
	}
	for _, c := range got {
		wantExe := map[string]string{ToolConverter: ToolConverter, ToolCtxGen: h.tool(ToolCtxGen)}[c.Tool]
		if h.Windows && c.Tool == ToolConverter {
			wantExe = "python"
		}
		if c.Exe != wantExe {
			t.Errorf("%s ran as %s, want %s on %s", c.Tool, c.Exe, wantExe, h.Desc)
		}
		switch c.Tool {
		case ToolConverter:
			g := graphOf(c)
			f, ok := e.files[g]
			if !ok {
				t.Fatalf("converter run for unknown graph %q", g)
			}
			onnxAbs, _ := filepath.Abs(f.ONNX)
			encAbs, _ := filepath.Abs(f.Encodings)
			if c.Flag("--input_network") != onnxAbs || c.Flag("--quantization_overrides") != encAbs {
				t.Errorf("%s: converter args %q", g, c.Args)
			}
			// input_ids only on the first stage keeps its int32 dtype.
			keep := c.Args[slices.Index(c.Args, "--preserve_io_datatype")+1:]
			if strings.HasSuffix(g, "_01_of_02") != slices.Equal(keep, []string{"input_ids"}) {
				t.Errorf("%s: --preserve_io_datatype %q", g, keep)
			}
		case ToolCtxGen:
			if filepath.Base(c.Flag("--backend")) != h.lib("QnnHtp") || filepath.Base(c.Flag("--model")) != h.lib("QnnModelDlc") {
				t.Errorf("ctxgen backend/model %q", c.Args)
			}
			// All AR variants of the stage in one context, in variant order.
			var stage *shard.Stage
			for i := range e.plan.Stages {
				if ContextBinaryName(e.plan, i) == c.Flag("--binary_file") {
					stage = &e.plan.Stages[i]
				}
			}
			if stage == nil {
				t.Fatalf("ctxgen for unknown binary %q", c.Flag("--binary_file"))
			}
			var dlcGraphs []string
			for _, d := range strings.Split(c.Flag("--dlc_path"), ",") {
				dlcGraphs = append(dlcGraphs, strings.TrimSuffix(filepath.Base(d), ".dlc"))
			}
			if !slices.Equal(dlcGraphs, stage.Graphs) {
				t.Errorf("stage %d: --dlc_path graphs %v, want %v", stage.Index, dlcGraphs, stage.Graphs)
			}
			for _, f := range []string{"--output_dir", "--config_file"} {
				if c.Flag(f) == "" {
					t.Errorf("ctxgen without %s", f)
				}
			}
		default:
			t.Errorf("unexpected tool %q", c.Tool)
		}
	}

	// The bundle: verified, context binaries in stage order, the fake SDK's
	// header in each, built for the chosen SoC with the plan's vtcm_mb.
	m, err := VerifyBundle(e.out)
	if err != nil {
		t.Fatal(err)
	}
	var recipe bytes.Buffer
	json.Compact(&recipe, m.Recipe)
	if m.SDK.Version != "2.40.0.251030" || m.SDK.Source != "sdk.yaml" || m.Qnnprep != "test" || recipe.String() != `{"weights":"Q1_0"}` {
		t.Errorf("manifest %+v", m)
	}
	var genie struct {
		Dialog struct {
			Engine struct {
				Model struct {
					Binary struct {
						CtxBins []string `json:"ctx-bins"`
					}
				}
			}
		}
	}
	b, _ := os.ReadFile(filepath.Join(e.out, GenieConfigName))
	if err := json.Unmarshal(b, &genie); err != nil {
		t.Fatal(err)
	}
	bins := genie.Dialog.Engine.Model.Binary.CtxBins
	if !slices.Equal(bins, []string{"tiny_01_of_02.bin", "tiny_02_of_02.bin"}) {
		t.Errorf("ctx-bins %v", bins)
	}
	for i, name := range bins {
		data, err := os.ReadFile(filepath.Join(e.out, name))
		if err != nil {
			t.Fatal(err)
		}
		var desc struct {
			Graphs   []string
			SoCModel int    `json:"soc_model"`
			DSPArch  string `json:"dsp_arch"`
			VTCM     int    `json:"vtcm_mb"`
		}
		if !bytes.HasPrefix(data, []byte("FAKECTX1\n")) || json.Unmarshal(data[9:], &desc) != nil {
			t.Fatalf("%s is not the fake SDK's context binary", name)
		}
		if !slices.Equal(desc.Graphs, e.plan.Stages[i].Graphs) || desc.SoCModel != 69 || desc.DSPArch != "v79" || desc.VTCM != e.plan.VTCMMB {
			t.Errorf("%s: %+v", name, desc)
		}
	}
	if tb, _ := os.ReadFile(filepath.Join(e.out, TokenizerName)); string(tb) != `{"model":{"type":"BPE"}}` {
		t.Errorf("tokenizer not copied: %q", tb)
	}
	if len(res.Runs) != len(res.Jobs) {
		t.Errorf("%d results for %d jobs", len(res.Runs), len(res.Jobs))
	}
	manifest1, _ := os.ReadFile(filepath.Join(e.out, ManifestName))

	// Unchanged inputs: nothing runs, and the bundle is byte-identical.
	if _, err := Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if got := fakesdk.Calls(t, e.calls); len(got) != 0 {
		t.Fatalf("second build ran %d tools: %v", len(got), got)
	}
	if manifest2, _ := os.ReadFile(filepath.Join(e.out, ManifestName)); !bytes.Equal(manifest1, manifest2) {
		t.Error("rebuilding unchanged inputs changed the manifest")
	}

	// Touch one graph of stage 2: only its converter and stage 2's context
	// job run again.
	g := e.plan.Stages[1].Graphs[0]
	writeGraph(t, e.in, &e.plan.Graphs[slices.IndexFunc(e.plan.Graphs, func(x shard.Graph) bool { return x.Name == g })], "v2")
	if _, err := Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	got = fakesdk.Calls(t, e.calls)
	var ran []string
	for _, c := range got {
		ran = append(ran, c.Tool+" "+graphOf(c))
	}
	want := []string{ToolConverter + " " + g, ToolCtxGen + " tiny_02_of_02"}
	if !slices.Equal(ran, want) {
		t.Errorf("after touching %s ran %v, want %v", g, ran, want)
	}
	if _, err := VerifyBundle(e.out); err != nil {
		t.Fatal(err)
	}

	// A context binary changed behind the cache's back is rebuilt.
	bin := res.Stages[0].Binary
	os.WriteFile(bin, []byte("FAKECTX1\ncorrupt"), 0o644)
	if _, err := Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if got := fakesdk.Calls(t, e.calls); len(got) != 1 || got[0].Tool != ToolCtxGen {
		t.Errorf("after corrupting %s ran %v", bin, got)
	}
}

func TestBuildToolFailure(t *testing.T) {
	e := newBuildEnv(t, shard.Options{})
	t.Setenv("FAKESDK_FAIL", ToolCtxGen+":tiny_02_of_02")
	t.Setenv("FAKESDK_FAIL_CODE", "7")
	_, err := Build(context.Background(), e.options())
	var te *ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error %v is not a ToolError", err)
	}
	if te.Stage != 1 || te.Tool != ToolCtxGen || te.ExitCode != 7 {
		t.Errorf("ToolError %+v", te)
	}
	log, rerr := os.ReadFile(te.Log)
	if rerr != nil || !bytes.Contains(log, []byte("injected failure")) || !bytes.Contains(log, []byte("--binary_file tiny_02_of_02")) {
		t.Errorf("log %s: %v\n%s", te.Log, rerr, log)
	}
	msg := err.Error()
	for _, want := range []string{"stage 2", ToolCtxGen, "exit code 7", te.Log, "injected failure", "err 1002"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
	if _, err := os.Stat(e.out); !os.IsNotExist(err) {
		t.Errorf("a failed build left a bundle at %s", e.out)
	}
	// After the tool is fixed, exactly the jobs without outputs run: what
	// finished before the failure is cached (after a failure no new job
	// starts, so how far the other stage got depends on scheduling).
	res, _ := Build(context.Background(), BuildOptions{SDK: e.sdk, Plan: e.plan, Config: fakesdk.ModelConfig(4), Graphs: e.files, OutDir: e.out, SoC: "8elite", DryRun: true})
	var want []string
	for _, j := range res.Jobs {
		if _, err := os.Stat(j.Outputs[0]); err != nil {
			want = append(want, j.Tool+" "+strings.TrimSuffix(filepath.Base(j.Outputs[0]), filepath.Ext(j.Outputs[0])))
		}
	}
	if !slices.Contains(want, ToolCtxGen+" tiny_02_of_02") {
		t.Fatalf("failed job's output exists")
	}
	os.RemoveAll(e.out) // the dry run wrote a bundle
	os.Unsetenv("FAKESDK_FAIL")
	fakesdk.Calls(t, e.calls)
	if _, err := Build(context.Background(), e.options()); err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, c := range fakesdk.Calls(t, e.calls) {
		ran = append(ran, c.Tool+" "+graphOf(c))
	}
	slices.Sort(ran)
	slices.Sort(want)
	if !slices.Equal(ran, want) {
		t.Errorf("after fixing the tool ran %v, want %v", ran, want)
	}
}

func TestBuildConverterRejectsBadInput(t *testing.T) {
	e := newBuildEnv(t, shard.Options{})
	g := e.plan.Graphs[0].Name
	os.WriteFile(e.files[g].Encodings, []byte("{not json"), 0o644)
	_, err := Build(context.Background(), e.options())
	var te *ToolError
	if !errors.As(err, &te) || te.Tool != ToolConverter || te.Graph != g || te.ExitCode != 2 {
		t.Fatalf("error %v", err)
	}
	if !strings.Contains(err.Error(), "quantization overrides") {
		t.Errorf("error does not carry the tool's message: %v", err)
	}
}

// groupMembers lists the live (non-zombie) processes in process group pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) >= 3 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestBuildCancelKillsToolsAndLeavesNothing(t *testing.T) {
	e := newBuildEnv(t, shard.Options{})
	pids := t.TempDir()
	t.Setenv("FAKESDK_SLEEP", "60s")
	t.Setenv("FAKESDK_SPAWN", "1")
	t.Setenv("FAKESDK_PIDS", pids)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := e.options()
	o.WorkDir = filepath.Join(t.TempDir(), "work")
	errc := make(chan error, 1)
	go func() { _, err := Build(ctx, o); errc <- err }()

	// Two tools (the default parallelism) each with a child.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ents, _ := os.ReadDir(pids)
		if len(ents) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools did not start: %d pid files", len(ents))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Build after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Build did not return after cancel")
	}
	ents, _ := os.ReadDir(pids)
	for _, ent := range ents {
		pid, _ := strconv.Atoi(ent.Name())
		// SIGKILL is immediate, but init reaps re-parented children when
		// it gets to run: on a loaded machine that takes more than a moment.
		settle := time.Now().Add(10 * time.Second)
		for (alive(pid) || len(groupMembers(pid)) > 0) && time.Now().Before(settle) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d still running after cancel", pid)
		}
		// The tools lead their own process groups; nothing may be left in them.
		if m := groupMembers(pid); len(m) > 0 {
			t.Errorf("process group %d still has %v", pid, m)
		}
	}
	if _, err := os.Stat(e.out); !os.IsNotExist(err) {
		t.Errorf("interrupted build left %s", e.out)
	}
	// No temporary run directory and no output: the DLCs were half-written
	// in the temp dirs only.
	filepath.WalkDir(o.WorkDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("left temporary %s", p)
		}
		if strings.HasSuffix(p, ".dlc") || strings.HasSuffix(p, ".bin") {
			t.Errorf("left output %s", p)
		}
		return nil
	})
	entries, _ := os.ReadDir(filepath.Dir(e.out))
	for _, ent := range entries {
		if atomicfile.IsTemp(ent.Name()) {
			t.Errorf("left temporary bundle %s", ent.Name())
		}
	}
}

func TestBuildSPDBundle(t *testing.T) {
	e := newBuildEnv(t, shard.Options{Dialog: shard.Dialog{Type: shard.SPD, DraftLen: 3}})
	draftCfg := fakesdk.ModelConfig(1)
	draftPlan := testPlan(t, draftCfg, "draft", shard.Options{Stages: 1})
	bin := filepath.Join(t.TempDir(), "draft_01_of_01.bin")
	os.WriteFile(bin, []byte("draft context"), 0o644)
	o := e.options()
	if _, err := Build(context.Background(), o); err == nil || !strings.Contains(err.Error(), "draft model") {
		t.Fatalf("spd without a draft: %v", err)
	}
	o.Draft = &DraftModel{Plan: draftPlan, Config: draftCfg, ContextBinaries: []string{bin}}
	if _, err := Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	m, err := VerifyBundle(e.out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(m.Files, func(f ManifestFile) bool { return f.Path == "draft/draft_01_of_01.bin" }) {
		t.Errorf("draft binary not in the bundle: %+v", m.Files)
	}
	b, _ := os.ReadFile(filepath.Join(e.out, GenieConfigName))
	if err := ValidateGenieConfig(b); err != nil || !bytes.Contains(b, []byte(`"draft/draft_01_of_01.bin"`)) {
		t.Errorf("genie config %v\n%s", err, b)
	}
}

func TestBuildTimeout(t *testing.T) {
	e := newBuildEnv(t, shard.Options{})
	t.Setenv("FAKESDK_SLEEP", "30s")
	o := e.options()
	o.Timeout = 300 * time.Millisecond
	start := time.Now()
	_, err := Build(context.Background(), o)
	var te *ToolError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("timeout took %s", time.Since(start))
	}
}

func TestDryRunWithoutSDK(t *testing.T) {
	p := testPlan(t, fakesdk.ModelConfig(4), "tiny", shard.Options{})
	in := t.TempDir()
	files := writeGraphs(t, p, in)
	out := filepath.Join(t.TempDir(), "bundle")
	var log bytes.Buffer
	res, err := Build(context.Background(), BuildOptions{
		Plan: p, Config: fakesdk.ModelConfig(4), Graphs: files, OutDir: out, SoC: "sm8650", DryRun: true, Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != len(res.Jobs) {
		t.Fatalf("%d command lines for %d jobs", len(lines), len(res.Jobs))
	}
	for i, l := range lines {
		if l != res.Jobs[i].Command() {
			t.Errorf("line %d: %s\nwant %s", i, l, res.Jobs[i].Command())
		}
		if !strings.HasPrefix(l, `"${QNN_SDK_ROOT}"/bin/x86_64-linux-clang/`) {
			t.Errorf("line %d does not start with the SDK variable: %s", i, l)
		}
	}
	// The compile configs exist for the SDK to use later.
	for _, sp := range res.Stages {
		var inner struct {
			Devices []struct {
				SoCModel int    `json:"soc_model"`
				DSPArch  string `json:"dsp_arch"`
			}
		}
		b, err := os.ReadFile(sp.HTPConfig)
		if err != nil || json.Unmarshal(b, &inner) != nil || inner.Devices[0].SoCModel != 57 || inner.Devices[0].DSPArch != "v75" {
			t.Errorf("%s: %v %s", sp.HTPConfig, err, b)
		}
	}
	m, err := VerifyBundle(out)
	if err == nil || !m.DryRun || !strings.Contains(err.Error(), "dry-run") {
		t.Errorf("verify of a dry-run bundle: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, GenieConfigName)); err != nil {
		t.Error(err)
	}
}

func TestBuildRefusesSmallVTCMForOneBit(t *testing.T) {
	e := newBuildEnv(t, shard.Options{})
	e.plan = testPlan(t, fakesdk.ModelConfig(4), "tiny", shard.Options{LayerTypes: oneBitTypes(), VTCMMB: 4})
	_, err := Build(context.Background(), e.options())
	if err == nil || !strings.Contains(err.Error(), shard.RuleVTCMOneBit) {
		t.Fatalf("error %v", err)
	}
	// Even when the contract check is skipped, qnnpack does not compile a
	// 1-bit stage with less VTCM.
	o := e.options()
	o.SkipCheck = true
	_, err = Build(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "stage 1 holds Q1_0 weights but vtcm_mb is 4") {
		t.Fatalf("error %v", err)
	}
	if got := fakesdk.Calls(t, e.calls); len(got) != 0 {
		t.Errorf("ran %d tools", len(got))
	}
}

func TestBuildMissingGraphFiles(t *testing.T) {
	e := newBuildEnv(t, shard.Options{})
	delete(e.files, e.plan.Graphs[3].Name)
	_, err := Build(context.Background(), e.options())
	if err == nil || !strings.Contains(err.Error(), e.plan.Graphs[3].Name) {
		t.Fatalf("error %v", err)
	}
}

// TestDryRunCommandLinesPerHost: a dry run prints, for each build-machine
// layout, commands with that layout's folder and names: the converter
// through python and .exe/.dll on Windows.
func TestDryRunCommandLinesPerHost(t *testing.T) {
	p := testPlan(t, fakesdk.ModelConfig(4), "tiny", shard.Options{})
	graphs := map[string]GraphFiles{}
	for _, g := range p.Graphs {
		graphs[g.Name] = GraphFiles{ONNX: "/in/" + g.Name + ".onnx", Encodings: "/in/" + g.Name + ".encodings"}
	}
	const r = `"${QNN_SDK_ROOT}"`
	for _, tt := range []struct {
		host      Host
		conv, ctx string
	}{
		{LinuxX64, r + "/bin/x86_64-linux-clang/qairt-converter --input_network",
			r + "/bin/x86_64-linux-clang/qnn-context-binary-generator --backend " + r + "/lib/x86_64-linux-clang/libQnnHtp.so --model " + r + "/lib/x86_64-linux-clang/libQnnModelDlc.so --dlc_path"},
		{WindowsX64, "python " + r + "/bin/x86_64-windows-msvc/qairt-converter --input_network",
			r + "/bin/x86_64-windows-msvc/qnn-context-binary-generator.exe --backend " + r + "/lib/x86_64-windows-msvc/QnnHtp.dll --model " + r + "/lib/x86_64-windows-msvc/QnnModelDlc.dll --dlc_path"},
		{WindowsARM64, "python " + r + "/bin/aarch64-windows-msvc/qairt-converter --input_network",
			r + "/bin/aarch64-windows-msvc/qnn-context-binary-generator.exe --backend " + r + "/lib/aarch64-windows-msvc/QnnHtp.dll --model " + r + "/lib/aarch64-windows-msvc/QnnModelDlc.dll --dlc_path"},
	} {
		sdk := DryRunSDKFor(tt.host)
		jobs, stages, err := PlanJobs(sdk, p, graphs, "/w")
		if err != nil {
			t.Fatal(err)
		}
		if got := jobs[0].Command(); !strings.HasPrefix(got, tt.conv) {
			t.Errorf("%s converter:\n got %s\nwant %s …", tt.host.Dir, got, tt.conv)
		}
		if got := jobs[2].Command(); !strings.HasPrefix(got, tt.ctx) {
			t.Errorf("%s context binary:\n got %s\nwant %s …", tt.host.Dir, got, tt.ctx)
		}
		outer, _ := CtxGenConfig(sdk.ExtensionsLib, stages[0].HTPConfig)
		if want := tt.host.lib("QnnHtpNetRunExtensions"); !strings.Contains(string(outer), "/lib/"+tt.host.Dir+"/"+want) {
			t.Errorf("%s: ctx-gen config names no %s: %s", tt.host.Dir, want, outer)
		}
	}
}

// TestPlanJobsCommandLines pins the exact command lines of a two-stage,
// two-variant plan to the flags documented on PlanJobs (qnn-genie.md §2).
func TestPlanJobsCommandLines(t *testing.T) {
	p := testPlan(t, fakesdk.ModelConfig(4), "tiny", shard.Options{})
	sdk := &SDK{
		Converter:     "/sdk/bin/x86_64-linux-clang/qairt-converter",
		CtxGen:        "/sdk/bin/x86_64-linux-clang/qnn-context-binary-generator",
		HtpLib:        "/sdk/lib/x86_64-linux-clang/libQnnHtp.so",
		ExtensionsLib: "/sdk/lib/x86_64-linux-clang/libQnnHtpNetRunExtensions.so",
		ModelDlcLib:   "/sdk/lib/x86_64-linux-clang/libQnnModelDlc.so",
	}
	graphs := map[string]GraphFiles{}
	for _, g := range p.Graphs {
		graphs[g.Name] = GraphFiles{ONNX: "/in/" + g.Name + ".onnx", Encodings: "/in/" + g.Name + ".encodings"}
	}
	jobs, stages, err := PlanJobs(sdk, p, graphs, "/w")
	if err != nil {
		t.Fatal(err)
	}
	conv := func(g, stage, keep string) string {
		s := "/sdk/bin/x86_64-linux-clang/qairt-converter --input_network /in/" + g + ".onnx --output_path /w/" + stage + "/." + g + ".tmp-run/" + g + ".dlc --quantization_overrides /in/" + g + ".encodings"
		if keep != "" {
			s += " --preserve_io_datatype " + keep
		}
		return s
	}
	ctx := func(stage, bin, a, b string) string {
		return "/sdk/bin/x86_64-linux-clang/qnn-context-binary-generator --backend /sdk/lib/x86_64-linux-clang/libQnnHtp.so --model /sdk/lib/x86_64-linux-clang/libQnnModelDlc.so" +
			" --dlc_path /w/" + stage + "/" + a + ".dlc,/w/" + stage + "/" + b + ".dlc --binary_file " + bin +
			" --output_dir /w/" + stage + "/." + bin + ".tmp-run --config_file /w/" + stage + "/ctxgen_config.json"
	}
	want := []string{
		conv("tiny_ar16_cl128_01_of_02", "stage_01", "input_ids"),
		conv("tiny_ar1_cl128_01_of_02", "stage_01", "input_ids"),
		ctx("stage_01", "tiny_01_of_02", "tiny_ar16_cl128_01_of_02", "tiny_ar1_cl128_01_of_02"),
		conv("tiny_ar16_cl128_02_of_02", "stage_02", ""),
		conv("tiny_ar1_cl128_02_of_02", "stage_02", ""),
		ctx("stage_02", "tiny_02_of_02", "tiny_ar16_cl128_02_of_02", "tiny_ar1_cl128_02_of_02"),
	}
	if len(jobs) != len(want) {
		t.Fatalf("%d jobs, want %d", len(jobs), len(want))
	}
	for i, j := range jobs {
		if got := j.Command(); got != want[i] {
			t.Errorf("job %d:\n got %s\nwant %s", i, got, want[i])
		}
	}
	if !slices.Equal(jobs[2].Deps, []int{0, 1}) || !slices.Equal(jobs[5].Deps, []int{3, 4}) || len(jobs[0].Deps) != 0 {
		t.Errorf("deps %v %v", jobs[2].Deps, jobs[5].Deps)
	}
	if jobs[2].Outputs[0] != "/w/stage_01/tiny_01_of_02.bin" || stages[1].Binary != "/w/stage_02/tiny_02_of_02.bin" {
		t.Errorf("outputs %v, stage %+v", jobs[2].Outputs, stages[1])
	}
	if !slices.Equal(jobs[2].Inputs, []string{"/w/stage_01/tiny_ar16_cl128_01_of_02.dlc", "/w/stage_01/tiny_ar1_cl128_01_of_02.dlc", "/w/stage_01/ctxgen_config.json", "/w/stage_01/htp_backend_ext.json"}) {
		t.Errorf("ctxgen inputs %v", jobs[2].Inputs)
	}

	// Compile configs: two levels, inner with the stage's graphs.
	soc, _ := LookupSoC("8elite")
	inner, _ := CompileExtConfig(p.Stages[0].Graphs, 8, 3, soc)
	const wantInner = `{
  "graphs": [
    {
      "graph_names": [
        "tiny_ar16_cl128_01_of_02",
        "tiny_ar1_cl128_01_of_02"
      ],
      "vtcm_mb": 8,
      "O": 3
    }
  ],
  "devices": [
    {
      "soc_model": 69,
      "dsp_arch": "v79"
    }
  ],
  "context": {
    "weight_sharing_enabled": true
  }
}
`
	if string(inner) != wantInner {
		t.Errorf("inner config:\n%s", inner)
	}
	outer, _ := CtxGenConfig(sdk.ExtensionsLib, stages[0].HTPConfig)
	var o struct {
		BackendExtensions map[string]string `json:"backend_extensions"`
	}
	if json.Unmarshal(outer, &o) != nil || o.BackendExtensions["shared_library_path"] != sdk.ExtensionsLib || o.BackendExtensions["config_file_path"] != "/w/stage_01/htp_backend_ext.json" {
		t.Errorf("outer config %s", outer)
	}
}

func TestBuildConverterArgs(t *testing.T) {
	e := newBuildEnv(t, shard.Options{})
	o := e.options()
	if _, err := Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	fakesdk.Calls(t, e.calls)
	// Extra converter flags reach every conversion and invalidate the cache.
	o.ConverterArgs = []string{"--float_bitwidth", "16", "--target_backend", "HTP"}
	if _, err := Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	got := fakesdk.Calls(t, e.calls)
	if len(got) != len(e.plan.Graphs)+len(e.plan.Stages) {
		t.Fatalf("%d runs after changing converter flags", len(got))
	}
	for _, c := range got {
		if c.Tool == ToolConverter && (c.Flag("--float_bitwidth") != "16" || c.Flag("--target_backend") != "HTP") {
			t.Errorf("converter args %q", c.Args)
		}
	}
	// The fake converter rejects a bad value, as the real one would.
	o.ConverterArgs = []string{"--target_backend", "htp"}
	if _, err := Build(context.Background(), o); err == nil || !strings.Contains(err.Error(), "upper case") {
		t.Errorf("lower-case backend: %v", err)
	}
	o.ConverterArgs = []string{"--output_path=x.dlc"}
	if _, err := Build(context.Background(), o); err == nil || !strings.Contains(err.Error(), "sets it itself") {
		t.Errorf("conflicting flag: %v", err)
	}
}

// BenchmarkHashFile measures the cache's cost per input byte: every build
// hashes every ONNX, encodings, DLC and context binary once.
func BenchmarkHashFile(b *testing.B) {
	p := filepath.Join(b.TempDir(), "x")
	data := bytes.Repeat([]byte("qnnprep "), 8<<20) // 64 MiB
	os.WriteFile(p, data, 0o644)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := hashFile(p); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBuildRefusesInconsistentPlan(t *testing.T) {
	// The observed SSD failure: AR == CL graphs run as AR-c, so the
	// selection mask can never match n_process (qnn-genie.md §0).
	e := newBuildEnv(t, shard.Options{AR: []int{32}, CL: []int{32}, ARc: true,
		Dialog: shard.Dialog{Type: shard.SSD, ForecastTokenCount: 1, Branches: []int{1}, ForecastPrefix: 16, ForecastPrefixName: "kv"}})
	_, err := Build(context.Background(), e.options())
	if err == nil || !strings.Contains(err.Error(), shard.RuleARcMask) || !strings.Contains(err.Error(), "nothing was built") {
		t.Fatalf("error %v", err)
	}
	if got := fakesdk.Calls(t, e.calls); len(got) != 0 {
		t.Errorf("ran %d tools", len(got))
	}
}

func TestCheckBinarySizes(t *testing.T) {
	dir := t.TempDir()
	var stages []StagePaths
	for i, size := range []int64{100, 3 << 30} {
		p := filepath.Join(dir, strconv.Itoa(i)+".bin")
		f, _ := os.Create(p)
		f.Truncate(size) // sparse
		f.Close()
		stages = append(stages, StagePaths{Binary: p})
	}
	if err := checkBinarySizes(stages[:1], nil, shard.DefaultMaxStageBytes); err != nil {
		t.Error(err)
	}
	err := checkBinarySizes(stages, nil, shard.DefaultMaxStageBytes)
	if err == nil || !strings.Contains(err.Error(), "stage 2") || !strings.Contains(err.Error(), "3221225472 bytes") {
		t.Errorf("error %v", err)
	}
}

// A build that fails leaves no bundle that verifies: the one an earlier
// build wrote into the same directory is marked incomplete before any
// work, since it no longer stands for what was asked.
func TestFailedBuildInvalidatesBundle(t *testing.T) {
	e := newBuildEnv(t, shard.Options{})
	if _, err := Build(context.Background(), e.options()); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBundle(e.out); err != nil {
		t.Fatalf("first build: %v", err)
	}
	t.Setenv("FAKESDK_FAIL", ToolCtxGen+":tiny_02_of_02")
	o := e.options()
	o.Force = true
	if _, err := Build(context.Background(), o); err == nil {
		t.Fatal("second build did not fail")
	}
	if _, err := VerifyBundle(e.out); err == nil || !strings.Contains(err.Error(), "marked incomplete") {
		t.Errorf("bundle after a failed rebuild: %v", err)
	}
}
