package onnx

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit"
)

// randomEagle3 is an EAGLE-3 head for target config tc with random F32
// weights, 50 draft tokens and the target's embeddings.
func randomEagle3(tc model.Config, seed uint64) (runtime.Eagle3Config, []*model.Tensor) {
	cfg := runtime.Eagle3Config{Hidden: tc.Hidden, FFN: 192, Heads: 4, KVHeads: 2, HeadDim: 32, DraftVocab: 50,
		TargetHidden: tc.Hidden, ExtractLayers: runtime.DefaultExtractLayers(tc.Layers), RMSEps: 1e-5, RopeTheta: 10000, NormBeforeResidual: seed%2 == 0}
	rng := rand.New(rand.NewPCG(seed, 11))
	f32 := func(name string, dims []int64, fill func() float32) *model.Tensor {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		b := make([]byte, 4*n)
		for i := int64(0); i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(fill()))
		}
		return model.NewTensor(name, dims, gguf.F32, b)
	}
	mat := func(name string, cols, rows int) *model.Tensor {
		s := 1 / math.Sqrt(float64(cols))
		return f32(name, []int64{int64(cols), int64(rows)}, func() float32 { return float32(s * rng.NormFloat64()) })
	}
	norm := func(name string) *model.Tensor {
		return f32(name, []int64{int64(cfg.Hidden)}, func() float32 { return float32(1 + 0.1*rng.NormFloat64()) })
	}
	H, qd, kvd := cfg.Hidden, cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	d2t := make([]byte, 8*cfg.DraftVocab)
	for i := range cfg.DraftVocab {
		binary.LittleEndian.PutUint64(d2t[8*i:], uint64(i))
	}
	return cfg, []*model.Tensor{
		mat("fc.weight", 3*H, H), model.NewTensor("d2t", []int64{int64(cfg.DraftVocab)}, gguf.I64, d2t),
		norm("blk.0.attn_norm.weight"), norm("blk.0.attn_norm_2.weight"),
		mat("blk.0.attn_q.weight", 2*H, qd), mat("blk.0.attn_k.weight", 2*H, kvd), mat("blk.0.attn_v.weight", 2*H, kvd),
		mat("blk.0.attn_output.weight", qd, H), norm("blk.0.ffn_norm.weight"),
		mat("blk.0.ffn_gate.weight", H, cfg.FFN), mat("blk.0.ffn_up.weight", H, cfg.FFN), mat("blk.0.ffn_down.weight", cfg.FFN, H),
		norm("output_norm.weight"), mat("output.weight", H, cfg.DraftVocab),
	}
}

// eagletExport exports an eaglet plan of m (2 stages, AR 8 and 1, CL 64)
// with a random EAGLE-3 head into dir: target stages and draft graphs.
func eagletExport(t *testing.T, m *model.Model, dir string, external bool) (*shard.Plan, *runtime.Engine, *runtime.Eagle3, []string) {
	t.Helper()
	e, err := runtime.New(m, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	hcfg, hts := randomEagle3(m.Config, uint64(len(m.Config.Arch)))
	head, err := runtime.NewEagle3(e, hcfg, hts)
	if err != nil {
		t.Fatal(err)
	}
	eh := head.EagletHead()
	dl := shard.Dialog{Type: shard.Eaglet, DraftLen: 2, NBranches: 2, MaxTargetTokens: 8}
	p, err := shard.NewPlan(m.Config, shard.Sizes{Layers: make([]int64, m.Config.Layers)}, "tiny_"+string(m.Config.Arch),
		shard.Options{Stages: 2, AR: []int{8, 1}, CL: []int{64}, Dialog: dl, EagletHead: &eh})
	if err != nil {
		t.Fatal(err)
	}
	if vs := shard.Check(p, shard.CheckEnv{}); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
	opts := ExportOptions{External: external, Options: Options{Eagle3: &Eagle3Head{Tensors: head.Tensors(), RMSEps: hcfg.RMSEps, NormBeforeResidual: hcfg.NormBeforeResidual, RopeNeox: hcfg.RopeNeox}}}
	paths, err := Export(m, p, dir, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	more, err := ExportDraft(context.Background(), p, dir, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, e, head, append(paths, more...)
}

// TestExportEagletChecker: the eaglet target stages (embedding input,
// taps, fc) and draft graphs pass the ONNX checker with full_check, inline
// and with external data; a target without the head is refused.
func TestExportEagletChecker(t *testing.T) {
	testkit.Need(t, peers.PythonONNX)
	for i, arch := range []model.Arch{model.Llama, model.Qwen3} {
		t.Run(string(arch), func(t *testing.T) {
			m := tinyModel(t, synth.Config(arch, false), 5)
			p, _, _, paths := eagletExport(t, m, t.TempDir(), i == 0)
			if n, want := checkONNX(t, paths), len(p.Graphs)+len(p.Draft.Graphs); n != want {
				t.Fatalf("%d models, want %d", n, want)
			}
			if _, err := Export(m, p, t.TempDir(), ExportOptions{}, nil); err == nil {
				t.Error("exported the last stage without the head's fc")
			}
		})
	}
}

// TestExportEagletFCBytes: the last stage's fc must weigh what the plan
// counts for it (draft.head.fc_bytes), or the export is refused.
func TestExportEagletFCBytes(t *testing.T) {
	m := tinyModel(t, synth.Config(model.Llama, false), 5)
	p, _, head, _ := eagletExport(t, m, t.TempDir(), true)
	p.Draft.Head.FCBytes--
	opts := ExportOptions{Options: Options{Eagle3: &Eagle3Head{Tensors: head.Tensors()}}}
	if _, err := Export(m, p, t.TempDir(), opts, nil); err == nil || !strings.Contains(err.Error(), "the plan counts") {
		t.Fatalf("export with a plan that undercounts fc: %v", err)
	}
}
