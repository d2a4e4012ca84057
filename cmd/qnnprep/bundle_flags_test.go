package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

// maxOverlap is the most fake SDK tools that ran at once (FAKESDK_RUNNING).
func maxOverlap(t *testing.T, dir string) int {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, "overlap"))
	m := 0
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		m = max(m, n)
	}
	os.Remove(filepath.Join(dir, "overlap"))
	return m
}

// TestBundleBuildFlags: each bundle build flag changes what is built or
// how, seen in the bundle, the work directory or the fake SDK's call log.
func TestBundleBuildFlags(t *testing.T) {
	dir := t.TempDir()
	planPath, graphs := storiesBundleInputs(t, dir)
	root := fakeSDKRoot(t)
	calls := filepath.Join(dir, "calls.jsonl")
	t.Setenv("FAKESDK_CALLS", calls)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	bundle := func(out string, extra ...string) []string {
		return append([]string{"bundle", "build", "--plan", planPath, "--model", storiesGGUF, "--graphs", graphs, "--out", out, "--soc", "8elite"}, extra...)
	}
	out := filepath.Join(dir, "bundle")
	work := filepath.Join(dir, "mywork")
	tok := writeText(t, dir, "tokenizer.json", `{"model":{"type":"BPE","vocab":{}}}`)

	// --work and --tokenizer.
	runOK(t, bundle(out, "--qnn-sdk", root, "--work", work, "--tokenizer", tok)...)
	if st, _ := filepath.Glob(filepath.Join(work, "stage_*")); len(st) != 2 {
		t.Errorf("--work %s: stage directories %v", work, st)
	}
	if _, err := os.Stat(out + ".work"); !os.IsNotExist(err) {
		t.Errorf("--work given, but %s.work exists", out)
	}
	if b, _ := os.ReadFile(filepath.Join(out, qnnpack.TokenizerName)); !bytes.Equal(b, []byte(`{"model":{"type":"BPE","vocab":{}}}`)) {
		t.Errorf("--tokenizer: bundle holds %q", b)
	}
	if n := len(fakesdk.Calls(t, calls)); n != 6 {
		t.Fatalf("first build ran %d tools, want 6", n)
	}

	// --force rebuilds what the cache would reuse.
	runOK(t, bundle(out, "--qnn-sdk", root, "--work", work)...)
	if n := len(fakesdk.Calls(t, calls)); n != 0 {
		t.Errorf("unchanged rebuild ran %d tools", n)
	}
	runOK(t, bundle(out, "--qnn-sdk", root, "--work", work, "--force")...)
	if n := len(fakesdk.Calls(t, calls)); n != 6 {
		t.Errorf("--force ran %d tools, want 6", n)
	}

	// --converter-arg reaches every converter run.
	runOK(t, bundle(out, "--qnn-sdk", root, "--work", work, "--converter-arg=--float_bitwidth", "--converter-arg=16")...)
	checkConverterArg(t, calls, 4)

	// -j: how many tools run at once.
	running := t.TempDir()
	t.Setenv("FAKESDK_RUNNING", running)
	t.Setenv("FAKESDK_SLEEP", "400ms")
	for _, j := range []int{1, 3} {
		runOK(t, bundle(filepath.Join(dir, "j"+strconv.Itoa(j)), "--qnn-sdk", root, "-j", strconv.Itoa(j))...)
		if m := maxOverlap(t, running); (j == 1) != (m == 1) || m < 1 {
			t.Errorf("-j %d: at most %d tools ran at once", j, m)
		}
	}
	// --timeout stops a tool that takes longer.
	t.Setenv("FAKESDK_SLEEP", "5s")
	var code int
	errOut := captureStderr(t, func() {
		code = run(bundle(filepath.Join(dir, "slow"), "--qnn-sdk", root, "--timeout", "300ms"))
	})
	if code != 1 || !strings.Contains(errOut, "300ms") {
		t.Errorf("--timeout 300ms: exit %d: %s", code, errOut)
	}
	t.Setenv("FAKESDK_SLEEP", "")
	fakesdk.Calls(t, calls)

	// --dry-run needs no SDK and runs none: it prints the commands.
	if code := run(bundle(filepath.Join(dir, "nosdk"))); code != 1 {
		t.Errorf("no SDK, no --dry-run: exit %d, want 1", code)
	}
	stdout := runOK(t, bundle(filepath.Join(dir, "dry"), "--dry-run")...)
	if strings.Count(stdout, qnnpack.ToolCtxGen+" ") != 2 || len(fakesdk.Calls(t, calls)) != 0 {
		t.Errorf("--dry-run printed:\n%s", stdout)
	}
	if bins, _ := filepath.Glob(filepath.Join(dir, "dry", "*.bin")); len(bins) != 0 {
		t.Errorf("--dry-run wrote context binaries %v", bins)
	}

	// --skip-check builds a plan that breaks Genie's contract.
	os.MkdirAll(filepath.Join(dir, "bad"), 0o755)
	os.MkdirAll(filepath.Join(dir, "ssd"), 0o755)
	badPlan, badGraphs := storiesBundleInputs(t, filepath.Join(dir, "bad"), "--context-size", "256")
	bad := []string{"bundle", "build", "--plan", badPlan, "--model", storiesGGUF, "--graphs", badGraphs, "--out", filepath.Join(dir, "badout"), "--soc", "8elite", "--dry-run"}
	captureStderr(t, func() { code = run(bad) })
	if code == 0 {
		t.Error("a plan with context.size above its CL built without --skip-check")
	}
	runOK(t, append(bad, "--skip-check")...)

	// --forecast-prefix puts the given KV file in an ssd-q1 bundle instead
	// of the zero placeholder.
	ssdPlan, ssdGraphs := storiesBundleInputs(t, filepath.Join(dir, "ssd"), "--dialog", "ssd-q1", "--forecast-token-count", "2", "--branches", "2", "--forecast-prefix", "16", "--forecast-prefix-name", "fp")
	ssd := []string{"bundle", "build", "--plan", ssdPlan, "--model", storiesGGUF, "--graphs", ssdGraphs, "--soc", "8elite", "--dry-run", "--skip-check"}
	runOK(t, append(ssd, "--out", filepath.Join(dir, "ssd1"))...)
	placeholder, err := os.ReadFile(filepath.Join(dir, "ssd1", "fp", qnnpack.ForecastPrefixFile))
	if err != nil {
		t.Fatal(err)
	}
	mine := bytes.Clone(placeholder)
	mine[len(mine)-1] ^= 0x55 // a KV value, not the header
	prefix := filepath.Join(dir, "prefix.bin")
	os.WriteFile(prefix, mine, 0o644)
	runOK(t, append(ssd, "--out", filepath.Join(dir, "ssd2"), "--forecast-prefix", prefix)...)
	if got, _ := os.ReadFile(filepath.Join(dir, "ssd2", "fp", qnnpack.ForecastPrefixFile)); !bytes.Equal(got, mine) {
		t.Error("--forecast-prefix: the bundle does not hold the given file")
	}
}

// checkConverterArg checks that the SDK calls logged in calls (which
// fakesdk.Calls then empties) ran the converter want times, each with
// --converter-arg=--float_bitwidth --converter-arg=16.
func checkConverterArg(t *testing.T, calls string, want int) {
	t.Helper()
	conv := 0
	for _, c := range fakesdk.Calls(t, calls) {
		if c.Tool == qnnpack.ToolConverter {
			conv++
			if c.Flag("--float_bitwidth") != "16" {
				t.Errorf("--converter-arg missing: %v", c.Args)
			}
		}
	}
	if conv != want {
		t.Errorf("%d converter runs, want %d", conv, want)
	}
}
