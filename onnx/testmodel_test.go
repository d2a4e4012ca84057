package onnx

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// tinyConfig is a small valid config of arch. Widths are multiples of 128
// so every weight type, Q1_0 included, can hold them.
func tinyConfig(arch model.Arch) model.Config {
	c := model.Config{
		Arch: arch, VocabSize: 96, Hidden: 128, Layers: 2, FFN: 256,
		Heads: 4, KVHeads: 2, HeadDim: 32, ContextLength: 64,
		RMSEps: 1e-6, RopeTheta: 10000, RopeDim: 32, RopeNeox: true,
		BOS: 1, EOS: 2,
	}
	c.LayerKinds = make([]model.LayerKind, c.Layers)
	f := arch.Features()
	c.RopeNeox = !f.NormRope
	c.QKVBias, c.QKNorm, c.AttnOutputGate = f.QKVBias, f.QKNorm, f.GatedAttention
	// Tied heads and the eps as in the real models of each family.
	c.TiedEmbeddings = tiedArchs[arch]
	if f.NormRope {
		c.RMSEps = 1e-5
	}
	if f.DeltaNet {
		c.Layers = 4
		c.LayerKinds = []model.LayerKind{model.DeltaNet, model.DeltaNet, model.DeltaNet, model.Attention}
		c.HeadDim = 64
		c.RopeDim = 16
		c.ConvKernel = 4
		c.SSMKeyHeads, c.SSMValueHeads = 2, 4
		c.SSMKeyDim, c.SSMValueDim = 32, 32
		c.SSMTiledHeads = f.TiledValueHeads
	}
	if f.MRoPE {
		c.MRopeSections = []int{3, 3, 2, 0}
	}
	return c
}

// tiedArchs are the architectures whose test models tie the head to the
// embedding.
var tiedArchs = map[model.Arch]bool{model.Qwen3: true, model.Qwen35: true}

// randomModel builds a model with random F32 weights (independent of any
// quantizer: the float graph is checked against the runtime on it).
func randomModel(t testing.TB, cfg model.Config, seed uint64) *model.Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	var tensors []*model.Tensor
	for _, s := range model.ExpectedTensors(cfg) {
		n := 1
		for _, d := range s.Dims {
			n *= int(d)
		}
		vals := make([]float32, n)
		name := s.Name
		for i := range vals {
			switch {
			case strings.HasSuffix(name, "norm.weight"):
				vals[i] = 1 + 0.1*float32(rng.NormFloat64())
			case strings.HasSuffix(name, "ssm_a"):
				vals[i] = -float32(math.Exp(rng.Float64()*2 - 1))
			case strings.HasSuffix(name, ".bias"), strings.HasSuffix(name, "ssm_conv1d.weight"):
				vals[i] = 0.5 * float32(rng.NormFloat64())
			case name == "token_embd.weight" && cfg.TiedEmbeddings:
				// Small, so the residual does not make every token predict
				// itself through the tied head.
				vals[i] = 0.05 * float32(rng.NormFloat64())
			case name == "token_embd.weight":
				vals[i] = float32(rng.NormFloat64())
			default:
				vals[i] = float32(rng.NormFloat64() / math.Sqrt(float64(s.Dims[0])))
			}
		}
		data := make([]byte, 4*n)
		for i, v := range vals {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		tensors = append(tensors, model.NewTensor(name, s.Dims, gguf.F32, data))
	}
	m, err := model.New(cfg, tensors)
	if err != nil {
		t.Fatal(err)
	}
	m.Path = "synthetic-" + string(cfg.Arch)
	return m
}

// testPlan splits m into stages for AR values ars at context cl.
func testPlan(t testing.TB, m *model.Model, stages int, ars []int, cl int) *shard.Plan {
	t.Helper()
	p, err := shard.NewPlan(m.Config, shard.Sizes{Layers: make([]int64, m.Config.Layers)}, "tiny_"+string(m.Config.Arch),
		shard.Options{Stages: stages, AR: ars, CL: []int{cl}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
