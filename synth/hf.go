package synth

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/safetensors"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// WriteHF writes the synthetic model as a Hugging Face checkpoint in dir:
// config.json (Qwen3.5 in its multimodal text_config form), tokenizer.json
// (the VocabMetadata vocabulary) and F32
// safetensors, one model.safetensors when shards ≤ 1, else that many shards
// plus model.safetensors.index.json. The canonical → Hugging Face layout
// transforms are applied in reverse (llama q/k row permutation, w−1 for
// zero-centred norms, A_log, grouped value-head order, Qwen3-Next's fused
// in_proj_qkvz/in_proj_ba), so model.Open(dir) gives exactly the tensors of
// Weights and of WriteGGUF with F32. The directory is built under a
// temporary name and renamed into place (replacing an existing one).
func WriteHF(dir string, cfg model.Config, seed uint64, shards int) error {
	return writeHF(dir, cfg, seed, shards, Weights)
}

// WriteHFOneBit writes the 1-bit-native model (OneBitWeights) as a Hugging
// Face checkpoint (F32).
func WriteHFOneBit(dir string, cfg model.Config, seed uint64, shards int) error {
	return writeHF(dir, cfg, seed, shards, OneBitWeights)
}

func writeHF(dir string, cfg model.Config, seed uint64, shards int, weights weightsFunc) error {
	cfgJSON, err := model.HFConfigJSON(cfg)
	if err != nil {
		return fmt.Errorf("synth: %s: %w", dir, err)
	}
	w, err := hfWriter(cfg, seed, weights)
	if err != nil {
		return fmt.Errorf("synth: %s: %w", dir, err)
	}
	d, err := atomicfile.CreateDir(dir)
	if err != nil {
		return err
	}
	defer d.Abort()
	if err := atomicfile.WriteFile(filepath.Join(d.Path, "config.json"), cfgJSON); err != nil {
		return err
	}
	// Like a real checkpoint, it comes with its tokenizer.
	md, err := VocabMetadata(cfg.VocabSize)
	if err != nil {
		return fmt.Errorf("synth: %s: %w", dir, err)
	}
	vocab, err := tokenizer.FromGGUF(md)
	if err != nil {
		return fmt.Errorf("synth: %s: %w", dir, err)
	}
	tokJSON, err := tokenizer.WriteHF(vocab)
	if err != nil {
		return fmt.Errorf("synth: %s: %w", dir, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(d.Path, "tokenizer.json"), tokJSON); err != nil {
		return err
	}
	if shards <= 1 {
		err = safetensors.WriteFile(filepath.Join(d.Path, "model.safetensors"), w)
	} else {
		err = safetensors.WriteSharded(d.Path, w, shards)
	}
	if err != nil {
		return err
	}
	return d.Commit()
}

// hfWriter lays out the Hugging Face tensors.
func hfWriter(cfg model.Config, seed uint64, weights weightsFunc) (*safetensors.Writer, error) {
	ts, err := weights(cfg, seed)
	if err != nil {
		return nil, err
	}
	g := gen{cfg: cfg, seed: seed}
	byName := map[string]*model.Tensor{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	vals := func(name string) ([]float32, error) {
		t := byName[name]
		if t == nil {
			return nil, fmt.Errorf("internal: no tensor %s", name)
		}
		return t.Float32()
	}
	f := cfg.Arch.Features()
	prefix := "model."
	if f.HFTextPrefix != "" {
		prefix = f.HFTextPrefix
	}
	zc := f.ZeroCentredNorms
	w := &safetensors.Writer{Metadata: map[string]string{"format": "pt"}}
	add := func(name string, v []float32, shape ...int64) {
		w.Tensors = append(w.Tensors, safetensors.WriterTensor{
			Name: name, Dtype: safetensors.F32, Shape: shape, Data: safetensors.Bytes(f32Bytes(v)),
		})
	}
	// torch shape of a canonical tensor: ggml dims reversed.
	shape := func(t *model.Tensor) []int64 {
		s := make([]int64, len(t.Dims))
		for i, d := range t.Dims {
			s[len(s)-1-i] = d
		}
		return s
	}
	minusOne := func(v []float32) []float32 {
		for i := range v {
			v[i]--
		}
		return v
	}
	D := cfg.HeadDim
	for _, t := range ts {
		v, err := t.Float32()
		if err != nil {
			return nil, err
		}
		name := t.Name
		if name == "token_embd.weight" {
			add(prefix+"embed_tokens.weight", v, shape(t)...)
			continue
		}
		if name == "output.weight" {
			add("lm_head.weight", v, shape(t)...)
			continue
		}
		if name == "output_norm.weight" {
			if zc {
				v = minusOne(v)
			}
			add(prefix+"norm.weight", v, shape(t)...)
			continue
		}
		var n int
		var sub string
		if _, err := fmt.Sscanf(name, "blk.%d.", &n); err != nil {
			return nil, fmt.Errorf("internal: unexpected tensor %s", name)
		}
		sub = strings.TrimPrefix(name, fmt.Sprintf("blk.%d.", n))
		lp := fmt.Sprintf("%slayers.%d.", prefix, n)
		switch sub {
		case "attn_norm.weight":
			if zc {
				v = minusOne(v)
			}
			add(lp+"input_layernorm.weight", v, shape(t)...)
		case "ffn_norm.weight", "post_attention_norm.weight":
			if zc {
				v = minusOne(v)
			}
			add(lp+"post_attention_layernorm.weight", v, shape(t)...)
		case "attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias":
			heads := cfg.Heads
			if strings.HasPrefix(sub, "attn_k") {
				heads = cfg.KVHeads
			}
			if f.NormRope {
				per := int(t.Dims[0])
				if len(t.Dims) == 1 {
					per = 1
				}
				v = gatherBlocks(v, per, unpermuteRows(heads, D))
			}
			add(lp+"self_attn."+string(sub[5])+"_proj"+sub[strings.IndexByte(sub, '.'):], v, shape(t)...)
		case "attn_v.weight", "attn_v.bias":
			add(lp+"self_attn.v_proj"+sub[strings.IndexByte(sub, '.'):], v, shape(t)...)
		case "attn_output.weight":
			add(lp+"self_attn.o_proj.weight", v, shape(t)...)
		case "attn_q_norm.weight", "attn_k_norm.weight":
			if zc {
				v = minusOne(v)
			}
			add(lp+"self_attn."+sub[5:6]+"_norm.weight", v, shape(t)...)
		case "ffn_gate.weight":
			add(lp+"mlp.gate_proj.weight", v, shape(t)...)
		case "ffn_up.weight":
			add(lp+"mlp.up_proj.weight", v, shape(t)...)
		case "ffn_down.weight":
			add(lp+"mlp.down_proj.weight", v, shape(t)...)
		default:
			if err := hfDeltaNet(cfg, g, n, sub, t, v, vals, lp+"linear_attn.", add); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// unpermuteRows undoes llama.cpp's q/k permutation: Hugging Face row
// h·D + s·D/2 + i is GGUF row h·D + 2i + s.
func unpermuteRows(heads, d int) []int {
	idx := make([]int, heads*d)
	for h := range heads {
		for s := range 2 {
			for i := range d / 2 {
				idx[h*d+s*d/2+i] = h*d + 2*i + s
			}
		}
	}
	return idx
}

// hfDeltaNet writes the Gated DeltaNet tensors of layer n.
func hfDeltaNet(cfg model.Config, g gen, n int, sub string, t *model.Tensor, v []float32,
	vals func(string) ([]float32, error), p string, add func(string, []float32, ...int64)) error {
	H := int64(cfg.Hidden)
	hk, hv, dk, dv := cfg.SSMKeyHeads, cfg.SSMValueHeads, cfg.SSMKeyDim, cfg.SSMValueDim
	keyDim, valueDim := hk*dk, hv*dv
	convDim := int64(cfg.ConvDim())
	// Canonical value heads → Hugging Face grouped order (qwen35 only):
	// grouped head h comes from tiled head grouped[h].
	var grouped []int
	if cfg.SSMTiledHeads {
		grouped = tiledToGrouped(cfg)
	}
	heads := func(v []float32, per int) []float32 {
		if grouped == nil {
			return v
		}
		return gatherBlocks(v, per, grouped)
	}
	if cfg.Arch.Features().FusedDeltaNetHF {
		switch sub {
		case "attn_qkv.weight":
			gate, err := vals(fmt.Sprintf("blk.%d.attn_gate.weight", n))
			if err != nil {
				return err
			}
			add(p+"in_proj_qkvz.weight", fuseQKVZ(cfg, v, gate), convDim+int64(valueDim), H)
			return nil
		case "ssm_beta.weight":
			alpha, err := vals(fmt.Sprintf("blk.%d.ssm_alpha.weight", n))
			if err != nil {
				return err
			}
			add(p+"in_proj_ba.weight", fuseBA(cfg, v, alpha), 2*int64(hv), H)
			return nil
		case "attn_gate.weight", "ssm_alpha.weight":
			return nil // fused above
		}
	}
	switch sub {
	case "attn_qkv.weight":
		row := cfg.Hidden
		qk := v[:2*keyDim*row]
		out := append(append([]float32(nil), qk...), heads(v[2*keyDim*row:], dv*row)...)
		add(p+"in_proj_qkv.weight", out, convDim, H)
	case "attn_gate.weight":
		add(p+"in_proj_z.weight", heads(v, dv*cfg.Hidden), int64(valueDim), H)
	case "ssm_beta.weight":
		add(p+"in_proj_b.weight", heads(v, cfg.Hidden), int64(hv), H)
	case "ssm_alpha.weight":
		add(p+"in_proj_a.weight", heads(v, cfg.Hidden), int64(hv), H)
	case "ssm_conv1d.weight":
		k := cfg.ConvKernel
		qk := v[:2*keyDim*k]
		out := append(append([]float32(nil), qk...), heads(v[2*keyDim*k:], dv*k)...)
		add(p+"conv1d.weight", out, convDim, 1, int64(k))
	case "ssm_dt.bias":
		add(p+"dt_bias", heads(v, 1), int64(hv))
	case "ssm_a":
		add(p+"A_log", g.aLog(n), int64(hv)) // generated in grouped order
	case "ssm_norm.weight":
		add(p+"norm.weight", v, int64(dv))
	case "ssm_out.weight":
		// Input columns in blocks of Dv per value head, in every row.
		out := make([]float32, 0, len(v))
		for r := range cfg.Hidden {
			out = append(out, heads(v[r*valueDim:(r+1)*valueDim], dv)...)
		}
		add(p+"out_proj.weight", out, H, int64(valueDim))
	default:
		return fmt.Errorf("internal: unexpected tensor %s", t.Name)
	}
	return nil
}

// fuseQKVZ builds Qwen3-Next's in_proj_qkvz, grouped by key head g:
// [q_g (Dk) | k_g (Dk) | v of heads g·r…g·r+r−1 | z of the same heads].
func fuseQKVZ(cfg model.Config, qkv, z []float32) []float32 {
	H := cfg.Hidden
	hk, hv, dk, dv := cfg.SSMKeyHeads, cfg.SSMValueHeads, cfg.SSMKeyDim, cfg.SSMValueDim
	r := hv / hk
	keyDim := hk * dk
	rows := func(src []float32, first, count int) []float32 { return src[first*H : (first+count)*H] }
	out := make([]float32, 0, len(qkv)+len(z))
	for g := range hk {
		out = append(out, rows(qkv, g*dk, dk)...)
		out = append(out, rows(qkv, keyDim+g*dk, dk)...)
		out = append(out, rows(qkv, 2*keyDim+g*r*dv, r*dv)...)
		out = append(out, rows(z, g*r*dv, r*dv)...)
	}
	return out
}

// fuseBA builds Qwen3-Next's in_proj_ba: per key head g, the beta rows
// then the alpha rows of value heads g·r…g·r+r−1.
func fuseBA(cfg model.Config, beta, alpha []float32) []float32 {
	H := cfg.Hidden
	r := cfg.SSMValueHeads / cfg.SSMKeyHeads
	out := make([]float32, 0, len(beta)+len(alpha))
	for g := range cfg.SSMKeyHeads {
		out = append(out, beta[g*r*H:(g+1)*r*H]...)
		out = append(out, alpha[g*r*H:(g+1)*r*H]...)
	}
	return out
}
