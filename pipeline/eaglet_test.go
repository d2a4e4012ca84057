package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// writeEagle3 writes synth's EAGLE-3 head (40 draft ids) for target tc.
func writeEagle3(t *testing.T, tc model.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "eagle3.gguf")
	if err := synth.WriteEagle3(path, tc, 40, 5); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkEagletBundle checks an eaglet bundle's Genie config, LUT, token map
// and draft plan.
func checkEagletBundle(t *testing.T, res *Result, vocab, hidden int) {
	t.Helper()
	b := res.Bundle
	genie, err := os.ReadFile(filepath.Join(b, qnnpack.GenieConfigName))
	if err != nil {
		t.Fatal(err)
	}
	dp, err := shard.ReadPlan(filepath.Join(b, qnnpack.BundleDraftPlanName))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type": "eaglet"`, `"eaglet-version": 1`, `"draft-len": 3`, `"n-branches": 2`, `"max-tokens-target-can-evaluate": 8`,
		`"draft-kv-cache": true`, `"draft-n-vocab": 40`, `"lut-path": "` + qnnpack.EagletLUTName + `"`, `"draft-token-map": "` + qnnpack.EagletTokenMapName + `"`,
		`"role": "draft"`, `"role": "target"`, `"draft/` + qnnpack.ContextBinaryName(dp, 0) + `.bin"`} {
		if !strings.Contains(string(genie), want) {
			t.Errorf("genie_config.json lacks %s:\n%s", want, genie)
		}
	}
	if fi, err := os.Stat(filepath.Join(b, qnnpack.EagletLUTName)); err != nil || fi.Size() != int64(vocab*hidden*4) {
		t.Errorf("embedding LUT: %v, %d bytes, want %d", err, fi.Size(), vocab*hidden*4)
	}
	var tm []int32
	data, err := os.ReadFile(filepath.Join(b, filepath.FromSlash(qnnpack.EagletTokenMapName)))
	if err != nil || json.Unmarshal(data, &tm) != nil || len(tm) != 40 || tm[39] != int32(39*vocab/40) {
		t.Errorf("draft-token-map %s: %v", data, err)
	}
	if len(dp.Graphs) != len(res.Plan.Variants) || dp.Graphs[0].Input(shard.DraftHiddenIn) == nil {
		t.Errorf("draft plan graphs %+v", dp.Graphs)
	}
	v := res.Verify
	if v == nil || v.SpeculativeEqualsWhole == nil || !*v.SpeculativeEqualsWhole || !*v.StagedEqualsWhole {
		t.Fatalf("verify %+v", v)
	}
	if !res.Pass() {
		t.Error("eaglet build did not pass")
	}
}

// TestEagletDryRun: build --dialog eaglet needs the head; with it the plan
// has the draft graphs and taps and passes check, the target and draft
// graphs are exported, the SDK commands cover both engines, the bundle has
// the eaglet Genie config, the embedding LUT, the draft-token-map and the
// draft plan, and verify decodes the dialog through the plan to the whole
// model's tokens.
func TestEagletDryRun(t *testing.T) {
	src, cfg := synthLlama(t)
	out := filepath.Join(t.TempDir(), "out")
	o := options(t, src, out, "int8")
	o.Plan.Dialog = shard.Dialog{Type: shard.Eaglet, DraftLen: 3, NBranches: 2, MaxTargetTokens: 8}
	if _, err := Build(context.Background(), o); err == nil || !strings.Contains(err.Error(), "dialog eaglet needs an EAGLE-3 head") {
		t.Fatalf("eaglet without a head: %v", err)
	}
	o.Eagle3 = writeEagle3(t, cfg)
	res, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) != 0 || res.Plan.Draft == nil {
		t.Fatalf("plan: draft %v, violations %v", res.Plan.Draft, res.Violations)
	}
	if s := res.Step(StepDraft); s == nil || s.Status != StatusDryRun {
		t.Fatalf("draft step %+v", s)
	}
	if n := strings.Count(strings.Join(res.Commands, "\n"), "_eagle3_ar"); n == 0 {
		t.Errorf("no draft commands:\n%s", strings.Join(res.Commands, "\n"))
	}
	if _, err := qnnpack.VerifyBundleFiles(res.Bundle); err != nil {
		t.Fatal(err)
	}
	checkEagletBundle(t, res, cfg.VocabSize, cfg.Hidden)
}

// TestEagletFakeSDK: with the (fake) SDK both engines are compiled and the
// bundle, with the draft's context binaries in draft/, verifies.
func TestEagletFakeSDK(t *testing.T) {
	src, cfg := synthLlama(t)
	out := filepath.Join(t.TempDir(), "out")
	o := options(t, src, out, "int8")
	o.DryRun, o.SDK = false, fakeSDK(t)
	tok := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(tok, []byte(`{"model":{"type":"BPE"}}`), 0o644)
	o.Tokenizer = tok
	o.Plan.Dialog = shard.Dialog{Type: shard.Eaglet, DraftLen: 3, NBranches: 2, MaxTargetTokens: 8}
	o.Eagle3 = writeEagle3(t, cfg)
	res, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qnnpack.VerifyBundle(res.Bundle); err != nil {
		t.Fatal(err)
	}
	dp, err := shard.ReadPlan(filepath.Join(res.Bundle, qnnpack.BundleDraftPlanName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(res.Bundle, "draft", qnnpack.ContextBinaryName(dp, 0)+".bin")); err != nil {
		t.Error(err)
	}
	checkEagletBundle(t, res, cfg.VocabSize, cfg.Hidden)
}
