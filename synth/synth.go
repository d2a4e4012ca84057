// Package synth makes deterministic synthetic models for tests and demos:
// small configurations of every supported architecture, random weights with
// sensible scales, and writers for the two source formats — a GGUF file
// that llama.cpp loads (with a small SentencePiece-style vocabulary) and a
// Hugging Face directory (config.json + safetensors) that model.Open maps
// to exactly the same canonical tensors.
//
// Every value depends only on (config, seed, tensor name), so the same call
// always gives byte-identical files.
package synth

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// Config returns a small configuration of arch. With q1 every matrix row
// (hidden, FFN, heads·head_dim, value width) is a multiple of 128, so Q1_0
// applies to every matrix; otherwise rows are multiples of 32 (Q8_0).
//
// The presets cover each architecture's features: qwen2 has q/k/v biases;
// qwen3 and qwen35 tie the output head to the embedding; qwen3next and
// qwen35 are hybrids of three Gated DeltaNet layers and one gated-attention
// layer with fewer key heads than value heads (Hk = 2, Hv = 8), so the
// qwen35 value-head reorder is exercised. Vocabulary: 512 tokens.
//
// Note: llama.cpp's qwen3next requires mixture-of-experts layers, which
// qnnprep does not support, so a synthetic qwen3next runs only in qnnprep.
func Config(arch model.Arch, q1 bool) model.Config {
	c := model.Config{
		Arch:          arch,
		VocabSize:     512,
		Hidden:        64,
		Layers:        2,
		FFN:           96,
		Heads:         4,
		KVHeads:       2,
		HeadDim:       16,
		ContextLength: 256,
		RMSEps:        1e-6,
		RopeTheta:     1e6,
		BOS:           1,
		EOS:           2,
	}
	if q1 {
		c.Hidden, c.FFN, c.HeadDim = 256, 384, 64
	}
	f := arch.Features()
	c.RopeNeox = !f.NormRope
	c.QKVBias = f.QKVBias
	c.QKNorm = f.QKNorm
	c.AttnOutputGate = f.GatedAttention
	if f.DeltaNet {
		c.Layers = 4
		c.HeadDim *= 2 // 32 or 128, so a quarter rotates as in the real models
		c.Heads, c.KVHeads = 2, 1
		c.ConvKernel = 4
		// r = Hv/Hk = 4 makes the qwen35 head reorder a permutation that
		// is not its own inverse (with r = 2 it would be), so a reversed
		// reorder cannot go unnoticed. llama.cpp requires Dk = Dv.
		c.SSMKeyHeads, c.SSMValueHeads = 2, 8
		c.SSMKeyDim, c.SSMValueDim = 16, 16
		c.SSMTiledHeads = f.TiledValueHeads
	}
	if p := presets[arch]; p != nil {
		p(&c)
	}
	c.RopeDim = c.HeadDim
	c.LayerKinds = make([]model.LayerKind, c.Layers)
	if c.SSMKeyHeads > 0 {
		c.RopeDim = c.HeadDim / 4 // partial_rotary_factor 0.25
		for i := range c.LayerKinds {
			if (i+1)%4 != 0 {
				c.LayerKinds[i] = model.DeltaNet
			}
		}
	}
	if f.MRoPE {
		// Real models use [11 11 10 0] for 32 rotated pairs; keep the same
		// proportions for RopeDim/2 pairs.
		n := c.RopeDim / 2
		h, w := n*11/32, n*10/32
		c.MRopeSections = []int{n - h - w, h, w, 0}
	}
	return c
}

// presets set what varies between real models of an architecture
// without being fixed by it (its Features), the way real models of each
// family do, so both sides of each value are covered.
var presets = map[model.Arch]func(*model.Config){
	model.Llama:  func(c *model.Config) { c.RMSEps, c.RopeTheta = 1e-5, 10000 },
	model.Qwen3:  func(c *model.Config) { c.TiedEmbeddings = true },
	model.Qwen35: func(c *model.Config) { c.RopeTheta, c.TiedEmbeddings = 1e7, true },
}

// gen produces canonical values per tensor from (seed, name).
type gen struct {
	cfg  model.Config
	seed uint64
}

func (g gen) rng(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(g.seed, h.Sum64()))
}

func normal(r *rand.Rand, n int64, std float64) []float32 {
	v := make([]float32, n)
	fillNormal(r, v, std)
	return v
}

// fillNormal fills v with the next len(v) draws of normal.
func fillNormal(r *rand.Rand, v []float32, std float64) {
	for i := range v {
		v[i] = float32(r.NormFloat64() * std)
	}
}

// aLog returns the Hugging Face A_log of a DeltaNet layer (value heads in
// grouped order): log of A uniform in [1, 16], as the reference init.
func (g gen) aLog(layer int) []float32 {
	r := g.rng(fmt.Sprintf("blk.%d.A_log", layer))
	v := make([]float32, g.cfg.SSMValueHeads)
	for i := range v {
		v[i] = float32(math.Log(1 + 15*r.Float64()))
	}
	return v
}

// values returns the canonical float32 values of tensor spec.
func (g gen) values(spec model.TensorSpec) []float32 {
	n := int64(1)
	for _, d := range spec.Dims {
		n *= d
	}
	name := spec.Name
	r := g.rng(name)
	base := name // the name without "blk.N."
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		_, base, _ = strings.Cut(rest, ".")
	}
	switch {
	case strings.HasSuffix(name, "norm.weight"):
		// Near 1, within [0.75, 1.25]: w ≥ 0.5 makes w−1 and back exact
		// in float32 (zero-centred Hugging Face norms store w−1). Before a
		// tied head, near 8, for logits with a spread of about 4.
		scale := float32(1)
		if name == "output_norm.weight" && g.cfg.TiedEmbeddings {
			scale = 8
		}
		v := normal(r, n, 0.1)
		for i := range v {
			v[i] = scale * (1 + float32(max(-0.25, min(0.25, float64(v[i])))))
		}
		return v
	case strings.HasSuffix(name, ".bias") && base != "ssm_dt.bias":
		return normal(r, n, 0.1)
	case base == "ssm_dt.bias":
		// Inverse softplus of dt log-uniform in [0.001, 0.1].
		v := make([]float32, n)
		for i := range v {
			dt := math.Exp(math.Log(0.001) + r.Float64()*(math.Log(0.1)-math.Log(0.001)))
			v[i] = float32(dt + math.Log(-math.Expm1(-dt)))
		}
		return v
	case base == "ssm_a":
		var layer int
		fmt.Sscanf(name, "blk.%d.", &layer)
		return ssmA(g.cfg, g.aLog(layer))
	}
	std, _ := g.normalStd(spec)
	return normal(r, n, std)
}

// normalStd reports whether spec's values are plain N(0, std²) draws from
// its rng (matrices, the conv kernel, embedding and head) and their std:
// those can be drawn a few rows at a time (fillNormal) in the same order.
func (g gen) normalStd(spec model.TensorSpec) (float64, bool) {
	name := spec.Name
	base := name
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		_, base, _ = strings.Cut(rest, ".")
	}
	switch {
	case strings.HasSuffix(name, "norm.weight"), strings.HasSuffix(name, ".bias"), base == "ssm_a",
		name == "rope_freqs.weight": // the Config's Llama 3 factors, not a draw
		return 0, false
	case name == "token_embd.weight" && g.cfg.TiedEmbeddings:
		// The head too. With larger embeddings the input token's own logit
		// (|e|² through the residual stream) wins most steps and the model
		// repeats its last token; output_norm scales the logits back up.
		return 0.5 / math.Sqrt(float64(spec.Dims[0])), true
	case name == "token_embd.weight":
		return 1, true
	case name == "output.weight":
		// Logits with a spread of about 4: clear greedy choices.
		return 4 / math.Sqrt(float64(spec.Dims[0])), true
	default: // matrices and the conv kernel: N(0, 1/fan_in)
		return 1 / math.Sqrt(float64(spec.Dims[0])), true
	}
}

// ssmA is llama.cpp's ssm_a = −exp(A_log), computed as model does, with
// value heads moved to the tiled order for qwen35.
func ssmA(cfg model.Config, aLog []float32) []float32 {
	v := make([]float32, len(aLog))
	for i, x := range aLog {
		v[i] = float32(-math.Exp(float64(x)))
	}
	if cfg.SSMTiledHeads {
		v = gatherBlocks(v, 1, groupedToTiled(cfg))
	}
	return v
}

// groupedToTiled returns, for each tiled (GGUF qwen35) value head h', the
// grouped (Hugging Face) head it holds: h' = j·Hk + g holds h = g·r + j.
func groupedToTiled(cfg model.Config) []int {
	hk, hv := cfg.SSMKeyHeads, cfg.SSMValueHeads
	r := hv / hk
	idx := make([]int, hv)
	for g := range hk {
		for j := range r {
			idx[j*hk+g] = g*r + j
		}
	}
	return idx
}

// tiledToGrouped is the inverse: for each grouped head h, its tiled index.
func tiledToGrouped(cfg model.Config) []int {
	fwd := groupedToTiled(cfg)
	inv := make([]int, len(fwd))
	for t, h := range fwd {
		inv[h] = t
	}
	return inv
}

// gatherBlocks returns dst with dst block i = src block idx[i], blocks of
// per elements.
func gatherBlocks(src []float32, per int, idx []int) []float32 {
	dst := make([]float32, len(src))
	for i, j := range idx {
		copy(dst[i*per:(i+1)*per], src[j*per:(j+1)*per])
	}
	return dst
}

// Weights returns the canonical tensors (all F32, model.ExpectedTensors
// order) of a model with cfg and seed. Values are computed on each Data
// call, so memory stays bounded by one tensor.
func Weights(cfg model.Config, seed uint64) ([]*model.Tensor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	g := gen{cfg: cfg, seed: seed}
	var out []*model.Tensor
	for _, spec := range model.ExpectedTensors(cfg) {
		if spec.Optional {
			continue // rope_freqs: model.New rebuilds it from the Config
		}
		spec := spec
		out = append(out, model.LazyTensor(spec.Name, spec.Dims, gguf.F32, func() ([]byte, error) {
			return f32Bytes(g.values(spec)), nil
		}))
	}
	return out, nil
}

// Model returns the synthetic model in memory (model.New over Weights).
func Model(cfg model.Config, seed uint64) (*model.Model, error) {
	return newModel(cfg, seed, Weights)
}

// newModel builds a model in memory over the tensors weights makes.
func newModel(cfg model.Config, seed uint64, weights func(model.Config, uint64) ([]*model.Tensor, error)) (*model.Model, error) {
	ts, err := weights(cfg, seed)
	if err != nil {
		return nil, err
	}
	m, err := model.New(cfg, ts)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	return m, nil
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
