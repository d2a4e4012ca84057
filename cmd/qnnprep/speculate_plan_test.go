package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/runtime"
)

// TestSpeculateEagle3Plan: an EAGLE-3 head drafts for stories260K through
// a three-stage plan (its feature layer 2 is a stage boundary); the output
// equals greedy decoding and the acceptance is exactly the whole-model
// run's.
func TestSpeculateEagle3Plan(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	head := filepath.Join(dir, "eagle3.gguf")
	writeRandomEagle3(t, head)
	plan := filepath.Join(dir, "plan.json")
	var code int
	runOK(t, "plan", storiesGGUF, "--stages", "3", "--ar", "4,1", "--cl", "128", "-o", plan)
	var res [2]runtime.Comparison
	for i, extra := range [][]string{nil, {"--plan", plan}} {
		args := append([]string{"speculate", storiesGGUF, "--eagle3", head, "-k", "3", "--prompt", "Once upon a time", "-n", "48", "--json"}, extra...)
		out := captureStdout(t, func() { code = run(args) })
		if err := json.Unmarshal([]byte(out), &res[i]); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
		if code != 0 || !res[i].EqualsGreedy || res[i].Stats.Windows == 0 {
			t.Fatalf("%v: exit %d, %+v", args, code, res[i])
		}
	}
	whole, staged := res[0], res[1]
	if staged.Plan != plan || staged.Stats.Windows != whole.Stats.Windows || staged.Stats.Accepted != whole.Stats.Accepted || staged.Stats.Proposed != whole.Stats.Proposed {
		t.Fatalf("staged %+v\nwhole %+v", staged.Stats, whole.Stats)
	}
	for i := range whole.Generated {
		if staged.Generated[i] != whole.Generated[i] {
			t.Fatalf("token %d: staged %d, whole %d", i, staged.Generated[i], whole.Generated[i])
		}
	}
	t.Logf("acceptance length %.2f (K=3), %d windows", staged.AcceptanceLength, staged.Stats.Windows)
}
