package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

// TestBuildFlags: each build flag not covered by the plan, SoC or
// --override tests changes what build makes or how, seen in its outputs
// or the fake SDK's call log; -t leaves every output the same.
func TestBuildFlags(t *testing.T) {
	src := synthLlamaGGUF(t)
	root := fakeSDKRoot(t)
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls.jsonl")
	t.Setenv("FAKESDK_CALLS", calls)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	build := func(out string, extra ...string) []string {
		return append([]string{"build", src, out, "--recipe", "q8_0", "--stages", "2", "--ar", "8,1", "--cl", "64", "--calibrate", "0", "-n", "4", "--qnn-sdk", root, "-q"}, extra...)
	}
	tok := writeText(t, dir, "tokenizer.json", `{"model":{"type":"BPE","vocab":{}}}`)
	prompts := writeText(t, dir, "prompts.txt", "ids: 1 5 9\n")

	// --name, --tokenizer, --converter-arg, --prompts, -n.
	out := filepath.Join(dir, "a")
	runOK(t, build(out, "--name", "mymodel", "--tokenizer", tok, "--prompts", prompts, "-n", "5", "--converter-arg=--float_bitwidth", "--converter-arg=16")...)
	p, err := shard.ReadPlan(filepath.Join(out, "work", "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Graphs[0].Name, "mymodel_") {
		t.Errorf("--name mymodel: graph %s", p.Graphs[0].Name)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "bundle", qnnpack.TokenizerName)); !bytes.Equal(b, []byte(`{"model":{"type":"BPE","vocab":{}}}`)) {
		t.Errorf("--tokenizer: bundle holds %q", b)
	}
	g, err := golden.Read(filepath.Join(out, "work", pipeline.GoldenName))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Prompts) != 1 || jsonString(g.Prompts[0].IDs) != "[1,5,9]" || len(g.Prompts[0].Expected) != 5 {
		t.Errorf("--prompts, -n 5: golden prompts %s", jsonString(g.Prompts))
	}
	checkConverterArg(t, calls, 4)

	// --force runs the SDK again where the cache would answer.
	again := []string{"--name", "mymodel", "--tokenizer", tok, "--converter-arg=--float_bitwidth", "--converter-arg=16", "--no-verify"}
	runOK(t, build(out, again...)...)
	if n := len(fakesdk.Calls(t, calls)); n != 0 {
		t.Errorf("unchanged rebuild ran %d tools", n)
	}
	runOK(t, build(out, append(again, "--force")...)...)
	if n := len(fakesdk.Calls(t, calls)); n != 6 {
		t.Errorf("--force ran %d tools, want 6", n)
	}

	var code int

	// --calibrate adds activation ranges to the encodings.
	runOK(t, build(filepath.Join(dir, "cal"), "--calibrate", "4", "--no-verify")...)
	enc, err := onnx.ReadEncodings(filepath.Join(dir, "cal", "work", "onnx", p.Graphs[0].Name[len("mymodel"):]+".encodings.json"))
	if err != nil {
		encs, _ := filepath.Glob(filepath.Join(dir, "cal", "work", "onnx", "*_01_of_02.encodings.json"))
		if len(encs) == 0 {
			t.Fatal(err)
		}
		if enc, err = onnx.ReadEncodings(encs[0]); err != nil {
			t.Fatal(err)
		}
	}
	if enc.Activation("hidden_states_0") == nil {
		t.Error("--calibrate 4: no hidden_states_0 range")
	}

	// --min-top1 replaces the recipe's default top-1 minimum, and the
	// summary says so (q1 of the 1-bit-native source is held to every
	// token by default; TestBuildThresholds shows a failing minimum).
	q1 := []string{"--recipe", "q1", "--stages", "1", "-n", "16"}
	stdout := captureStdout(t, func() { code = run(build(filepath.Join(dir, "top1"), append(q1, "--min-top1", "0.125")...)) })
	if code != 0 || !strings.Contains(stdout, "min-top1 0.125") || !strings.Contains(stdout, "min-top1 given") {
		t.Errorf("--min-top1 0.125: exit %d\n%s", code, stdout)
	}
	captureStderr(t, func() { code = run(build(filepath.Join(dir, "top1"), "--min-top1", "1.01")) })
	if code != 2 {
		t.Errorf("--min-top1 1.01: exit %d, want 2", code)
	}

	// --skip-check builds a plan that breaks Genie's contract.
	captureStdout(t, func() { code = run(build(filepath.Join(dir, "bad"), "--context-size", "256", "--no-verify")) })
	if code == 0 {
		t.Error("a plan with context.size above its CL built without --skip-check")
	}
	runOK(t, build(filepath.Join(dir, "bad"), "--context-size", "256", "--no-verify", "--skip-check")...)

	// -j: tools at once; --timeout: a tool's time limit.
	running := t.TempDir()
	t.Setenv("FAKESDK_RUNNING", running)
	t.Setenv("FAKESDK_SLEEP", "400ms")
	for _, j := range []int{1, 3} {
		runOK(t, build(filepath.Join(dir, "j"+strconv.Itoa(j)), "-j", strconv.Itoa(j), "--no-verify")...)
		if m := maxOverlap(t, running); (j == 1) != (m == 1) || m < 1 {
			t.Errorf("-j %d: at most %d tools ran at once", j, m)
		}
	}
	t.Setenv("FAKESDK_SLEEP", "5s")
	var errOut string
	captureStdout(t, func() {
		errOut = captureStderr(t, func() { code = run(build(filepath.Join(dir, "slow"), "--timeout", "300ms", "--no-verify")) })
	})
	if code != 1 || !strings.Contains(errOut, "300ms") {
		t.Errorf("--timeout 300ms: exit %d\n%s", code, errOut)
	}
	t.Setenv("FAKESDK_SLEEP", "")
	fakesdk.Calls(t, calls)

	// -t: the same bundle and qmodel with 1 and 3 threads.
	var bundles [2]string
	for i, threads := range []string{"1", "3"} {
		o := filepath.Join(dir, "t"+threads)
		runOK(t, build(o, "-t", threads)...)
		m, err := qnnpack.VerifyBundle(filepath.Join(o, "bundle"))
		if err != nil {
			t.Fatal(err)
		}
		qm, _ := os.ReadFile(filepath.Join(o, "work", "qmodel.gguf"))
		bundles[i] = jsonString(m.Files) + string(qm)
	}
	if bundles[0] != bundles[1] {
		t.Error("-t 1 and -t 3 built different bundles or qmodels")
	}

	// --draft-stages: the spd draft's context binaries.
	for _, n := range []int{1, 2} {
		o := filepath.Join(dir, "spd"+strconv.Itoa(n))
		runOK(t, build(o, "--dialog", "spd", "--draft-len", "3", "--draft", src, "--draft-stages", strconv.Itoa(n), "--no-verify")...)
		bins, _ := filepath.Glob(filepath.Join(o, "bundle", "draft", "*.bin"))
		if len(bins) != n {
			t.Errorf("--draft-stages %d: draft binaries %v", n, bins)
		}
	}
}
