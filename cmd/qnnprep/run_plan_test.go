package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// TestRunPlan decodes stories260K through two-stage plans with `run
// --plan`: the text and the ids from BOS are the fixture's (llama2.c's
// run.c and llama.cpp), the logits file is byte-identical to the whole
// model's, the prompt goes in one AR-32 call and the steps on AR 1. Bad
// plans and contexts are errors naming the problem.
func TestRunPlan(t *testing.T) {
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	fixtures := filepath.Dir(storiesGGUF)
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	var code int
	runOK(t, "plan", storiesGGUF, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", plan)

	wantText, err := os.ReadFile(filepath.Join(fixtures, "greedy_t0_n64_once_upon_a_time.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out string
	errOut := captureStderr(t, func() {
		out = captureStdout(t, func() {
			code = run([]string{"run", storiesGGUF, "--prompt", "Once upon a time", "-n", "60", "-t", "1", "--plan", plan})
		})
	})
	if code != 0 || out != string(wantText) {
		t.Fatalf("exit %d, output\n%q\nwant\n%q\n%s", code, out, wantText, errOut)
	}
	if !strings.Contains(errOut, "graph calls: 59 on AR 1 CL 128, 1 on AR 32 CL 128") {
		t.Errorf("stderr lacks the calls per variant:\n%s", errOut)
	}

	idsText, err := os.ReadFile(filepath.Join(fixtures, "greedy_ids_from_bos_first64.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(idsText))
	logits := map[bool]string{}
	for _, staged := range []bool{false, true} {
		logits[staged] = filepath.Join(dir, "logits-"+strconv.FormatBool(staged)+".bin")
		args := []string{"run", storiesGGUF, "--ids", "1", "-n", strconv.Itoa(len(want)), "--json", "--ignore-eos", "--logits", logits[staged]}
		if staged {
			args = append(args, "--plan", plan)
		}
		captureStderr(t, func() { out = captureStdout(t, func() { code = run(args) }) })
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		var res runtime.RunResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v in %q", err, out)
		}
		if len(res.Generated) != len(want) {
			t.Fatalf("%d ids, want %d", len(res.Generated), len(want))
		}
		for i, id := range res.Generated {
			if strconv.Itoa(int(id)) != want[i] {
				t.Fatalf("staged %v: id %d: %d, want %s", staged, i, id, want[i])
			}
		}
	}
	whole, err := os.ReadFile(logits[false])
	if err != nil {
		t.Fatal(err)
	}
	staged, err := os.ReadFile(logits[true])
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) == 0 || !bytes.Equal(whole, staged) {
		t.Errorf("staged logits (%d bytes) differ from whole (%d bytes)", len(staged), len(whole))
	}

	// A plan for another model, a plan whose CL cannot hold the request,
	// a plan CL beyond --ctx, and a missing plan.
	sm, err := synth.Model(synth.Config(model.Qwen3, false), 1)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := shard.PlanModel(sm, shard.Options{Stages: 2, AR: []int{4, 1}, CL: []int{64}})
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.json")
	if err := shard.WritePlan(other, sp); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.json")
	runOK(t, "plan", storiesGGUF, "--stages", "2", "--ar", "4,1", "--cl", "16", "-o", short)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--plan", other}, `does not fit model`},
		{[]string{"--plan", short, "-n", "20"}, "do not fit any variant: the largest cache, CL 16 on AR 1, keeps 15 entries"},
		{[]string{"--plan", plan, "--ctx", "64"}, "CL 128 exceeds the engine's context length 64"},
		{[]string{"--plan", filepath.Join(dir, "missing.json")}, "missing.json"},
	} {
		args := append([]string{"run", storiesGGUF, "--ids", "1"}, c.args...)
		errOut := captureStderr(t, func() { captureStdout(t, func() { code = run(args) }) })
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", c.args, code, errOut, c.want)
		}
	}
}
