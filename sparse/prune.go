package sparse

import (
	"fmt"
	"math"
	"slices"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

// Prune returns the physically smaller model that decodes like the zeroed
// variant: removed channels, heads, neurons or layers are taken out and the
// Config shrinks (Hidden and RMSEps, Heads, FFN, or Layers and
// LayerKinds). Tensors are computed on demand from the source model. Only
// structural patterns can be pruned.
func (v *Variant) Prune() (*model.Model, error) {
	if !v.pattern.Structural() {
		return nil, fmt.Errorf("sparse: pattern %s zeroes weights inside matrices; only channel, head, neuron and layer patterns can be pruned", v.pattern)
	}
	cfg := v.src.Config
	cfg.LayerKinds = slices.Clone(cfg.LayerKinds)
	var tensors []*model.Tensor
	var err error
	switch v.pattern.Kind {
	case Channel:
		tensors, err = v.pruneChannels(&cfg)
	case Head:
		tensors, err = v.pruneHeads(&cfg)
	case Neuron:
		tensors, err = v.pruneNeurons(&cfg)
	case Layer:
		tensors, err = v.pruneLayers(&cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("sparse: prune: %w", err)
	}
	m, err := model.New(cfg, tensors)
	if err != nil {
		return nil, fmt.Errorf("sparse: prune: %w", err)
	}
	m.Path = v.src.Path
	// The source's keys (tokenizer and all) with the new hyper-parameters,
	// and the chain that made it from the source.
	md, err := quantize.Derive(v.src, v.step()+", pruned")
	if err != nil {
		return nil, fmt.Errorf("sparse: prune: %w", err)
	}
	for _, kv := range m.GGUFMetadata() {
		md.Set(kv.Key, kv.Value)
	}
	m.Metadata = md
	return m, nil
}

// keep returns 0…n−1 without the sorted indices in drop.
func keep(n int, drop []int) []int {
	out := make([]int, 0, n-len(drop))
	j := 0
	for i := 0; i < n; i++ {
		if j < len(drop) && drop[j] == i {
			j++
			continue
		}
		out = append(out, i)
	}
	return out
}

// sub returns t restricted to the rows and columns kept (nil keeps all),
// each kept row r multiplied by scale(r) when scale is set.
func sub(t *model.Tensor, name string, rows, cols []int, scale func(r int) float32) *model.Tensor {
	n := int(t.Dims[0])
	nRows := int(t.Rows())
	dims := slices.Clone(t.Dims)
	if cols != nil {
		dims[0] = int64(len(cols))
	}
	if rows != nil {
		if len(dims) < 2 {
			dims = append(dims, 1)
		}
		dims[1] = int64(len(rows))
	} else {
		rows = make([]int, nRows)
		for i := range rows {
			rows[i] = i
		}
	}
	typ := outType(t.Type)
	return model.LazyTensor(name, dims, typ, func() ([]byte, error) {
		w, err := t.Float32()
		if err != nil {
			return nil, err
		}
		out := make([]float32, 0, int(dims[0])*len(rows))
		for _, r := range rows {
			row := w[r*n : (r+1)*n]
			s := float32(1)
			if scale != nil {
				s = scale(r)
			}
			if cols == nil {
				for _, x := range row {
					out = append(out, x*s)
				}
				continue
			}
			for _, c := range cols {
				out = append(out, row[c]*s)
			}
		}
		return encode(typ, out), nil
	})
}

func (v *Variant) pruneChannels(cfg *model.Config) ([]*model.Tensor, error) {
	d := cfg.Hidden
	kept := keep(d, v.removed.Channels)
	dp := len(kept)
	ratio := float64(d) / float64(dp)
	cfg.Hidden = dp
	if cfg.Hybrid() {
		return v.pruneChannelsScaled(cfg, kept, ratio), nil
	}
	s := float32(math.Sqrt(ratio))
	cfg.RMSEps = float32(float64(cfg.RMSEps) * ratio)
	rph := qRowsPerHead(cfg)
	hd := cfg.HeadDim
	// With q/k norms, q and k are scaled by s so that norm(s·q; eps·s²)
	// equals norm(q; eps); the gate rows of attn_q stay as they are.
	qScale := func(r int) float32 {
		if r%rph < hd {
			return s
		}
		return 1
	}
	kScale := func(int) float32 { return s }
	normScale := func(int) float32 { return s }
	var out []*model.Tensor
	for _, t := range v.src.Tensors {
		_, base, _ := blockName(t.Name)
		switch hiddenRole(t.Name) {
		case roleReader:
			var sc func(int) float32
			if cfg.QKNorm && base == "attn_q.weight" {
				sc = qScale
			} else if cfg.QKNorm && base == "attn_k.weight" {
				sc = kScale
			}
			out = append(out, sub(t, t.Name, nil, kept, sc))
		case roleWriter:
			out = append(out, sub(t, t.Name, kept, nil, nil))
		case roleNorm:
			out = append(out, sub(t, t.Name, nil, kept, normScale))
		default:
			switch {
			case cfg.QKNorm && base == "attn_q.bias":
				out = append(out, biasScale(t, qScale))
			case cfg.QKNorm && base == "attn_k.bias":
				out = append(out, biasScale(t, kScale))
			default:
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// pruneChannelsScaled prunes the hidden channels of a hybrid model, whose
// DeltaNet output norm shares Config.RMSEps and so cannot take eps·d/d'.
// It keeps eps and scales the residual stream by k = sqrt(d'/d) instead:
// the embedding and every writer ×k make x' = k·x, and then
// Σx'²/d' + eps = Σx²/d + eps, so hidden norms with weights w/k give the
// dense outputs. The output norm takes w/k, or w/k² when the head is the
// (scaled) tied embedding.
func (v *Variant) pruneChannelsScaled(cfg *model.Config, kept []int, ratio float64) []*model.Tensor {
	k := math.Sqrt(1 / ratio)
	up := func(int) float32 { return float32(k) }
	down := func(int) float32 { return float32(1 / k) }
	outNorm := down
	if cfg.TiedEmbeddings {
		outNorm = func(int) float32 { return float32(1 / (k * k)) }
	}
	var out []*model.Tensor
	for _, t := range v.src.Tensors {
		switch hiddenRole(t.Name) {
		case roleReader:
			var sc func(int) float32
			if t.Name == "token_embd.weight" {
				sc = up
			}
			out = append(out, sub(t, t.Name, nil, kept, sc))
		case roleWriter:
			out = append(out, sub(t, t.Name, kept, nil, up))
		case roleNorm:
			sc := down
			if t.Name == "output_norm.weight" {
				sc = outNorm
			}
			out = append(out, sub(t, t.Name, nil, kept, sc))
		default:
			out = append(out, t)
		}
	}
	return out
}

// biasScale multiplies element i of a 1-D tensor by scale(i).
func biasScale(t *model.Tensor, scale func(int) float32) *model.Tensor {
	typ := outType(t.Type)
	return model.LazyTensor(t.Name, t.Dims, typ, func() ([]byte, error) {
		w, err := t.Float32()
		if err != nil {
			return nil, err
		}
		for i := range w {
			w[i] *= scale(i)
		}
		return encode(typ, w), nil
	})
}

func (v *Variant) pruneHeads(cfg *model.Config) ([]*model.Tensor, error) {
	nh, d := cfg.Heads, cfg.HeadDim
	rph := qRowsPerHead(cfg)
	removed := -1
	for i, hs := range v.removed.Heads {
		if cfg.LayerKinds[i] != model.Attention {
			continue
		}
		if removed >= 0 && len(hs) != removed {
			return nil, fmt.Errorf("layer %d removes %d heads, others %d", i, len(hs), removed)
		}
		removed = len(hs)
	}
	if removed < 0 {
		return nil, fmt.Errorf("model has no attention layer")
	}
	cfg.Heads = nh - removed
	var out []*model.Tensor
	for _, t := range v.src.Tensors {
		i, base, ok := blockName(t.Name)
		if !ok || cfg.LayerKinds[i] != model.Attention {
			out = append(out, t)
			continue
		}
		heads := keep(nh, v.removed.Heads[i])
		qRows, oCols := headRows(heads, rph, d)
		switch base {
		case "attn_q.weight":
			out = append(out, sub(t, t.Name, qRows, nil, nil))
		case "attn_q.bias":
			out = append(out, sub(t, t.Name, nil, qRows, nil))
		case "attn_output.weight":
			out = append(out, sub(t, t.Name, nil, oCols, nil))
		default:
			out = append(out, t)
		}
	}
	return out, nil
}

func (v *Variant) pruneNeurons(cfg *model.Config) ([]*model.Tensor, error) {
	f := cfg.FFN
	k := -1
	for i, ns := range v.removed.Neurons {
		if k >= 0 && len(ns) != k {
			return nil, fmt.Errorf("layer %d removes %d neurons, others %d", i, len(ns), k)
		}
		k = len(ns)
	}
	cfg.FFN = f - max(k, 0)
	var out []*model.Tensor
	for _, t := range v.src.Tensors {
		i, base, ok := blockName(t.Name)
		if !ok {
			out = append(out, t)
			continue
		}
		kept := keep(f, v.removed.Neurons[i])
		switch base {
		case "ffn_gate.weight", "ffn_up.weight":
			out = append(out, sub(t, t.Name, kept, nil, nil))
		case "ffn_down.weight":
			out = append(out, sub(t, t.Name, nil, kept, nil))
		default:
			out = append(out, t)
		}
	}
	return out, nil
}

func (v *Variant) pruneLayers(cfg *model.Config) ([]*model.Tensor, error) {
	kept := keep(cfg.Layers, v.removed.Layers)
	newIndex := map[int]int{}
	kinds := make([]model.LayerKind, 0, len(kept))
	for j, i := range kept {
		newIndex[i] = j
		kinds = append(kinds, cfg.LayerKinds[i])
	}
	cfg.Layers, cfg.LayerKinds = len(kept), kinds
	var out []*model.Tensor
	for _, t := range v.src.Tensors {
		i, base, ok := blockName(t.Name)
		if !ok {
			out = append(out, t)
			continue
		}
		j, kept := newIndex[i]
		if !kept {
			continue
		}
		if j == i {
			out = append(out, t)
		} else {
			out = append(out, model.LazyTensor(blk(j, base), t.Dims, t.Type, t.Data))
		}
	}
	return out, nil
}
