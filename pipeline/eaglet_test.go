package pipeline

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

// writeEagle3 writes an EAGLE-3 head for target config tc in llama.cpp's
// eagle3 GGUF layout: random F32 weights, 40 draft tokens.
func writeEagle3(t *testing.T, tc model.Config) string {
	t.Helper()
	H := tc.Hidden
	cfg := runtime.Eagle3Config{Hidden: H, FFN: 2 * H, Heads: 4, KVHeads: 2, HeadDim: H / 4, DraftVocab: 40,
		TargetHidden: H, ExtractLayers: runtime.DefaultExtractLayers(tc.Layers), RMSEps: 1e-5, RopeTheta: 10000}
	rng := rand.New(rand.NewPCG(5, 5))
	w := &gguf.Writer{Metadata: runtime.Eagle3Metadata(cfg)}
	add := func(name string, dims ...int64) {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		b := make([]byte, 4*n)
		for i := int64(0); i < n; i++ {
			v := float32(rng.NormFloat64() / math.Sqrt(float64(dims[0])))
			if len(dims) == 1 {
				v = 1
			}
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: name, Dims: dims, Type: gguf.F32, Data: gguf.Bytes(b)})
	}
	h, f, qd, kvd := int64(H), int64(cfg.FFN), int64(cfg.Heads*cfg.HeadDim), int64(cfg.KVHeads*cfg.HeadDim)
	add("fc.weight", 3*h, h)
	add("blk.0.attn_norm.weight", h)
	add("blk.0.attn_norm_2.weight", h)
	add("blk.0.attn_q.weight", 2*h, qd)
	add("blk.0.attn_k.weight", 2*h, kvd)
	add("blk.0.attn_v.weight", 2*h, kvd)
	add("blk.0.attn_output.weight", qd, h)
	add("blk.0.ffn_norm.weight", h)
	add("blk.0.ffn_gate.weight", h, f)
	add("blk.0.ffn_up.weight", h, f)
	add("blk.0.ffn_down.weight", f, h)
	add("output_norm.weight", h)
	add("output.weight", h, 40)
	d2t := make([]byte, 8*40)
	for i := range 40 {
		binary.LittleEndian.PutUint64(d2t[8*i:], uint64(i*3))
	}
	w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: "d2t", Dims: []int64{40}, Type: gguf.I64, Data: gguf.Bytes(d2t)})
	path := filepath.Join(t.TempDir(), "eagle3.gguf")
	if err := gguf.WriteFile(path, w); err != nil {
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
	if err != nil || json.Unmarshal(data, &tm) != nil || len(tm) != 40 || tm[39] != 117 {
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
