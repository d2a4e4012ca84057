package synth

import (
	"fmt"
	"math"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

// OneBitWeights returns the tensors of a 1-bit-native model: every tensor
// the q1 recipe stores in a quantized type holds values that type
// represents exactly, as a model trained for 1-bit weights (BitNet-style)
// does. Q1_0 matrices are signs times one fp16 scale per group of 128; the
// Q2_0 head (and a tied embedding) is {−1, 0, 1, 2} times one fp16 scale
// per block of 64; Q8_0 tensors (DeltaNet gates) are integers in
// [−127, 127], one of them ±127, times one fp16 scale per block of 32.
// Scales follow Weights' standard deviations, so the model decodes like
// the ordinary synthetic one. Quantizing it with q1 is lossless: the qmodel
// dequantizes to exactly these values. Kept tensors are Weights'.
func OneBitWeights(cfg model.Config, seed uint64) ([]*model.Tensor, error) {
	ts, err := Weights(cfg, seed)
	if err != nil {
		return nil, err
	}
	shapes := make([]quantize.TensorShape, len(ts))
	for i, t := range ts {
		shapes[i] = quantize.TensorShape{Name: t.Name, Dims: t.Dims, Type: t.Type}
	}
	ds, err := quantize.Recipes["q1"].Decide(shapes, nil, cfg.TiedEmbeddings)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	g := gen{cfg: cfg, seed: seed}
	for i, t := range ts {
		typ := ds[i].Kind.Type
		if typ != gguf.Q1_0 && typ != gguf.Q2_0 && typ != gguf.Q8_0 {
			continue
		}
		t := t
		ts[i] = model.LazyTensor(t.Name, t.Dims, gguf.F32, func() ([]byte, error) {
			v, err := t.Float32()
			if err != nil {
				return nil, err
			}
			return f32Bytes(g.native(t.Name, v, int(t.Dims[0]), typ)), nil
		})
	}
	return ts, nil
}

// OneBitModel is OneBitWeights as a model in memory.
func OneBitModel(cfg model.Config, seed uint64) (*model.Model, error) {
	return newModel(cfg, seed, OneBitWeights)
}

// native replaces v (rows of n) by values typ represents exactly, keeping
// each block's root mean square and, for Q1_0, each value's sign.
func (g gen) native(name string, v []float32, n int, typ gguf.Type) []float32 {
	r := g.rng(name + "#1bit")
	block := map[gguf.Type]int{gguf.Q1_0: 128, gguf.Q2_0: 64, gguf.Q8_0: 32}[typ]
	out := make([]float32, len(v))
	for b := 0; b+block <= len(v); b += block {
		x, y := v[b:b+block], out[b:b+block]
		var ss float64
		for _, e := range x {
			ss += float64(e) * float64(e)
		}
		rms := math.Sqrt(ss / float64(block))
		switch typ {
		case gguf.Q1_0:
			d := fp16(rms)
			for j, e := range x {
				y[j] = d
				if e < 0 {
					y[j] = -d
				}
			}
		case gguf.Q2_0:
			// Codes −1, 0, 1, 2 with probabilities 0.35, 0.2, 0.35, 0.1:
			// mean square 1.05·d², so d ≈ rms.
			d := fp16(rms / math.Sqrt(1.05))
			for j := range y {
				u := r.Float64()
				k := float32(-1)
				switch {
				case u >= 0.9:
					k = 2
				case u >= 0.55:
					k = 1
				case u >= 0.35:
					k = 0
				}
				y[j] = k * d
			}
		case gguf.Q8_0:
			d := fp16(3 * rms / 127) // amax ≈ 3σ
			for j, e := range x {
				k := math.Round(float64(e) / float64(d))
				y[j] = float32(max(-127, min(127, k))) * d
			}
			j := r.IntN(block)
			y[j] = 127 * d
			if x[j] < 0 {
				y[j] = -127 * d
			}
		}
	}
	return out
}

// fp16 rounds a positive scale to the nearest fp16 value (at least the
// smallest normal one, so no block has a zero scale).
func fp16(x float64) float32 {
	return half.F16ToF32(half.F32ToF16(float32(max(x, 6.2e-5))))
}
