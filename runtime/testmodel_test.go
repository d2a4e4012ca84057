package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/int8"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quant1bit"
)

// tinyConfig returns a small valid config of the architecture. Widths are
// multiples of 128 so every weight type, Q1_0 included, can hold them.
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

// randomModel builds a model with random weights: 2-D matrices in typ
// (quantized with the reference quantizers), everything else F32.
func randomModel(t testing.TB, cfg model.Config, typ gguf.Type, seed uint64) *model.Model {
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
		switch {
		case strings.HasSuffix(name, "norm.weight"):
			for i := range vals {
				vals[i] = 1 + 0.1*float32(rng.NormFloat64())
			}
		case strings.HasSuffix(name, "ssm_a"):
			for i := range vals {
				vals[i] = -float32(math.Exp(rng.Float64()*2 - 1))
			}
		case strings.HasSuffix(name, "ssm_dt.bias"), strings.HasSuffix(name, ".bias"):
			for i := range vals {
				vals[i] = 0.5 * float32(rng.NormFloat64())
			}
		case strings.HasSuffix(name, "ssm_conv1d.weight"):
			for i := range vals {
				vals[i] = 0.5 * float32(rng.NormFloat64())
			}
		default:
			sc := float32(1 / math.Sqrt(float64(s.Dims[0])))
			if name == "token_embd.weight" {
				sc = 1
			}
			for i := range vals {
				vals[i] = sc * float32(rng.NormFloat64())
			}
		}
		tt := gguf.F32
		if len(s.Dims) == 2 && !strings.HasSuffix(name, "ssm_conv1d.weight") {
			tt = typ
		}
		tensors = append(tensors, model.NewTensor(name, s.Dims, tt, encode(t, tt, vals, int(s.Dims[0]))))
	}
	m, err := model.New(cfg, tensors)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// encode stores rows of cols values in typ.
func encode(t testing.TB, typ gguf.Type, vals []float32, cols int) []byte {
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	rows := len(vals) / cols
	out := make([]byte, int(rb)*rows)
	for r := 0; r < rows; r++ {
		src, dst := vals[r*cols:(r+1)*cols], out[r*int(rb):(r+1)*int(rb)]
		switch typ {
		case gguf.F32:
			for i, v := range src {
				binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
			}
		case gguf.F16:
			for i, v := range src {
				binary.LittleEndian.PutUint16(dst[2*i:], half.F32ToF16(v))
			}
		case gguf.BF16:
			for i, v := range src {
				binary.LittleEndian.PutUint16(dst[2*i:], half.F32ToBF16(v))
			}
		case gguf.Q8_0:
			int8.QuantizeRowQ8_0(src, dst)
		case gguf.Q1_0:
			quant1bit.QuantizeRowQ1_0(src, dst)
		case gguf.Q2_0:
			quant1bit.QuantizeRowQ2_0Ref(src, dst)
		default:
			t.Fatalf("encode: type %s", typ)
		}
	}
	return out
}

func randomTokens(n, vocab int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 11))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

func newEngine(t testing.TB, m *model.Model, opt Options) *Engine {
	t.Helper()
	e, err := New(m, opt)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func sameBits(a, b []float32) error {
	if len(a) != len(b) {
		return fmt.Errorf("lengths %d and %d", len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return fmt.Errorf("element %d: %v vs %v", i, a[i], b[i])
		}
	}
	return nil
}
