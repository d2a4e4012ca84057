package model

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/safetensors"
)

// maxConfigJSON bounds config.json; real ones are a few KiB.
const maxConfigJSON = 16 << 20

func openHF(dir string) (*Model, error) {
	cfgPath := filepath.Join(dir, "config.json")
	fi, err := os.Stat(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("model: %s: not a GGUF file or a Hugging Face model directory: %w", dir, err)
	}
	if fi.Size() > maxConfigJSON {
		return nil, fmt.Errorf("model: %s: %d bytes, too large for a config", cfgPath, fi.Size())
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	cfg, err := parseHFConfig(data)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", cfgPath, err)
	}
	st, err := safetensors.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m, err := fromHF(dir, cfg, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	return m, nil
}

// hfType is the ggml type of a safetensors dtype the model accepts.
func hfType(d safetensors.Dtype) (gguf.Type, bool) {
	switch d {
	case safetensors.F32:
		return gguf.F32, true
	case safetensors.F16:
		return gguf.F16, true
	case safetensors.BF16:
		return gguf.BF16, true
	}
	return 0, false
}

// hfMapper maps Hugging Face tensors to canonical ones.
type hfMapper struct {
	cfg      *Config
	f        Features
	byName   map[string]*Tensor
	skip     map[string]bool
	problems []string
}

func (h *hfMapper) problem(format string, a ...any) {
	h.problems = append(h.problems, fmt.Sprintf(format, a...))
}

func (h *hfMapper) add(name string, t *Tensor) {
	t.Name = name
	if old := h.byName[name]; old != nil {
		h.problem("duplicate tensor %s (from %s and %s)", name, old.src, t.src)
		return
	}
	h.byName[name] = t
}

// fromHF builds the canonical model over an open safetensors checkpoint.
func fromHF(dir string, cfg Config, st *safetensors.Model) (*Model, error) {
	f := cfg.Arch.Features()
	prefix := "model."
	if p := f.HFTextPrefix; p != "" {
		for _, ti := range st.Tensors {
			if strings.HasPrefix(ti.Name, p) {
				prefix = p
				break
			}
		}
	}
	h := &hfMapper{cfg: &cfg, f: f, byName: make(map[string]*Tensor, len(st.Tensors)), skip: map[string]bool{}}
	for i := range st.Tensors {
		ti := &st.Tensors[i]
		name := ti.Name
		switch {
		case strings.HasPrefix(name, "mtp."), strings.HasPrefix(name, "model.visual."),
			strings.HasPrefix(name, "visual."), strings.HasSuffix(name, ".rotary_emb.inv_freq"):
			continue // draft head, vision tower, cached rope table
		case name == "lm_head.weight" && cfg.TiedEmbeddings:
			continue // tied: the head is the embedding
		}
		dims := make([]int64, len(ti.Shape))
		for k, s := range ti.Shape {
			dims[len(dims)-1-k] = s
		}
		t := &Tensor{Dims: dims, src: name, mapped: true, load: func() ([]byte, error) { return st.Data(name) }}
		var ok bool
		if t.Type, ok = hfType(ti.Dtype); !ok {
			t.bad = fmt.Sprintf("dtype %s not supported (want F32, F16 or BF16)", ti.Dtype)
		}
		if name == "lm_head.weight" {
			h.add("output.weight", t)
			continue
		}
		rest, ok := strings.CutPrefix(name, prefix)
		switch {
		case !ok:
			h.problem("unexpected tensor %s", name)
		case rest == "embed_tokens.weight":
			h.add("token_embd.weight", t)
		case rest == "norm.weight":
			h.add("output_norm.weight", h.norm(t))
		default:
			h.layer(rest, t)
		}
	}
	if len(cfg.RopeFreqFactors) > 0 {
		// llama.cpp's converter adds the Llama 3 factors as a tensor.
		h.byName["rope_freqs.weight"] = NewTensor("rope_freqs.weight",
			[]int64{int64(len(cfg.RopeFreqFactors))}, gguf.F32, encodeFloat32(cfg.RopeFreqFactors))
	}
	ordered, problems := arrange(cfg, h.byName, h.skip, h.problems)
	if err := problemError(dir, problems); err != nil {
		return nil, err
	}
	m := &Model{
		Path: dir, Format: "safetensors", Config: cfg, Tensors: ordered,
		name: filepath.Base(filepath.Clean(dir)), close: st.Close,
	}
	m.index()
	m.Metadata = m.GGUFMetadata()
	return m, nil
}

// layer maps one "layers.N.…" tensor.
func (h *hfMapper) layer(rest string, t *Tensor) {
	c := h.cfg
	num, sub, _ := strings.Cut(strings.TrimPrefix(rest, "layers."), ".")
	n, err := strconv.Atoi(num)
	if !strings.HasPrefix(rest, "layers.") || err != nil || n < 0 || n >= c.Layers || strconv.Itoa(n) != num {
		h.problem("unexpected tensor %s", t.src)
		return
	}
	name, ok := h.f.HFLayerNames[sub]
	if !ok {
		name, ok = hfLayerNames[sub]
	}
	if ok {
		if name == "ffn_norm.weight" && h.f.PostAttentionNorm {
			name = "post_attention_norm.weight"
		}
		h.add(blk(n, name), h.transform(name, t))
		return
	}
	if !strings.HasPrefix(sub, "linear_attn.") || c.LayerKinds[n] != DeltaNet {
		h.problem("unexpected tensor %s", t.src)
		return
	}
	h.deltaNet(n, strings.TrimPrefix(sub, "linear_attn."), t)
}

// hfLayerNames maps the attention-layer tensors of a transformers
// checkpoint (after "layers.N.") to llama.cpp's names (after "blk.N.").
var hfLayerNames = map[string]string{
	"input_layernorm.weight":          "attn_norm.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.q_proj.bias":           "attn_q.bias",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.k_proj.bias":           "attn_k.bias",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.v_proj.bias":           "attn_v.bias",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"self_attn.o_proj.bias":           "attn_output.bias",
	"self_attn.q_norm.weight":         "attn_q_norm.weight",
	"self_attn.k_norm.weight":         "attn_k_norm.weight",
	"mlp.gate_proj.weight":            "ffn_gate.weight",
	"mlp.up_proj.weight":              "ffn_up.weight",
	"mlp.down_proj.weight":            "ffn_down.weight",
}

// transform applies what llama.cpp's converter does to the tensor it
// writes as blk.N.name: +1 on zero-centred norms, the NORM-rope row
// permutation of q and k.
func (h *hfMapper) transform(name string, t *Tensor) *Tensor {
	c := h.cfg
	switch {
	case strings.HasSuffix(name, "norm.weight"):
		return h.norm(t)
	case h.f.NormRope && strings.HasPrefix(name, "attn_q."):
		return permuted(t, func() []int { return ropeRows(c.Heads, c.HeadDim) })
	case h.f.NormRope && strings.HasPrefix(name, "attn_k."):
		return permuted(t, func() []int { return ropeRows(c.KVHeads, c.HeadDim) })
	}
	return t
}

// deltaNet maps a Gated DeltaNet tensor of layer n (§6.4 of the
// architecture reference).
func (h *hfMapper) deltaNet(n int, sub string, t *Tensor) {
	c := h.cfg
	b := func(s string) string { return blk(n, s) }
	// qwen35 with Hk ≠ Hv: value heads move from grouped to tiled order.
	var order func() []int
	if c.SSMTiledHeads && c.SSMKeyHeads != c.SSMValueHeads {
		order = func() []int { return tiledHeads(c.SSMKeyHeads, c.SSMValueHeads) }
	}
	reorder := func(t *Tensor, rows func() []int) *Tensor {
		if order == nil {
			return t
		}
		return permuted(t, rows)
	}
	H, Hv := int64(c.Hidden), int64(c.SSMValueHeads)
	switch sub {
	case "in_proj_qkv.weight":
		h.add(b("attn_qkv.weight"), reorder(t, func() []int { return vHeadRows(c) }))
	case "in_proj_z.weight":
		h.add(b("attn_gate.weight"), reorder(t, func() []int { return headRows(order(), c.SSMValueDim, 0, nil) }))
	case "in_proj_b.weight":
		h.add(b("ssm_beta.weight"), reorder(t, func() []int { return order() }))
	case "in_proj_a.weight":
		h.add(b("ssm_alpha.weight"), reorder(t, func() []int { return order() }))
	case "in_proj_qkvz.weight":
		valueDim := Hv * int64(c.SSMValueDim)
		h.problems = splitRows(t, []int64{H, int64(c.ConvDim()) + valueDim}, []split{
			{b("attn_qkv.weight"), int64(c.ConvDim()), func() []int { qkv, _ := qkvzRows(c); return qkv }},
			{b("attn_gate.weight"), valueDim, func() []int { _, z := qkvzRows(c); return z }},
		}, h.byName, h.skip, h.problems)
	case "in_proj_ba.weight":
		h.problems = splitRows(t, []int64{H, 2 * Hv}, []split{
			{b("ssm_beta.weight"), Hv, func() []int { beta, _ := baRows(c); return beta }},
			{b("ssm_alpha.weight"), Hv, func() []int { _, alpha := baRows(c); return alpha }},
		}, h.byName, h.skip, h.problems)
	case "conv1d.weight":
		// [conv_dim, 1, K] → squeezed ggml {K, conv_dim}
		if len(t.Dims) == 3 && t.Dims[1] == 1 {
			t.Dims = []int64{t.Dims[0], t.Dims[2]}
		}
		h.add(b("ssm_conv1d.weight"), reorder(t, func() []int {
			keyDim := c.SSMKeyHeads * c.SSMKeyDim
			return headRows(order(), c.SSMValueDim, 2*keyDim, identity(2*keyDim, 0, nil))
		}))
	case "dt_bias":
		h.add(b("ssm_dt.bias"), reorder(t, func() []int { return order() }))
	case "A_log":
		h.add(b("ssm_a"), h.ssmA(t, order))
	case "norm.weight":
		h.add(b("ssm_norm.weight"), t) // gated norm: not zero-centred
	case "out_proj.weight":
		if order != nil {
			// Permute the input columns: blocks of Dv elements in each row.
			t = permutedBlocks(t, int64(c.SSMValueDim), func() []int { return colBlocks(c.Hidden, order()) })
		}
		h.add(b("ssm_out.weight"), t)
	default:
		h.problem("unexpected tensor %s", t.src)
	}
}

// norm is a canonical RMSNorm weight: with zero-centred norms the
// checkpoint holds w−1 (HF computes x̂·(1+w)), so add 1 in float32 and
// store F32 as llama.cpp's converter does; otherwise it passes through.
func (h *hfMapper) norm(t *Tensor) *Tensor {
	if !h.f.ZeroCentredNorms {
		return t
	}
	return floatMap(t, nil, func(v []float32) {
		for i := range v {
			v[i] += 1
		}
	})
}

// ssmA turns A_log into llama.cpp's ssm_a = −exp(A_log), F32, value heads
// reordered when order is set.
func (h *hfMapper) ssmA(t *Tensor, order func() []int) *Tensor {
	return floatMap(t, order, func(v []float32) {
		for i, x := range v {
			v[i] = float32(-math.Exp(float64(x)))
		}
	})
}

// floatMap returns an F32 tensor of f applied to t's values, after
// gathering the elements in order (when set).
func floatMap(src *Tensor, order func() []int, f func([]float32)) *Tensor {
	return &Tensor{
		Dims: src.Dims, Type: gguf.F32, src: src.src, bad: src.bad, from: src,
		load: func() ([]byte, error) {
			v, err := src.Float32()
			if err != nil {
				return nil, err
			}
			if order != nil {
				b, err := gatherChecked(encodeFloat32(v), 4, order())
				if err != nil {
					return nil, err
				}
				v = make([]float32, len(v))
				decodeFloat32(gguf.F32, b, v)
			}
			f(v)
			return encodeFloat32(v), nil
		},
	}
}

// permuted returns src with its rows (Dims[0] elements each) gathered in
// the order rows() gives; a 1-D tensor's elements are its rows.
func permuted(src *Tensor, rows func() []int) *Tensor {
	per := src.Dims[0]
	if len(src.Dims) == 1 {
		per = 1
	}
	t := permutedBlocks(src, per, rows)
	if len(src.Dims) > 1 {
		t.rowPerm = rows
	}
	return t
}

// permutedBlocks gathers src's data in blocks of per elements.
func permutedBlocks(src *Tensor, per int64, blocks func() []int) *Tensor {
	return &Tensor{
		Dims: src.Dims, Type: src.Type, src: src.src, bad: src.bad, from: src,
		load: func() ([]byte, error) {
			b, err := src.Data()
			if err != nil {
				return nil, err
			}
			bb, err := src.Type.RowBytes(per)
			if err != nil {
				return nil, err
			}
			return gatherChecked(b, int(bb), blocks())
		},
	}
}

// gatherChecked is gatherRows after checking the permutation covers src
// exactly, so a wrong index can only give an error.
func gatherChecked(src []byte, rowBytes int, idx []int) ([]byte, error) {
	if rowBytes <= 0 || len(src) != len(idx)*rowBytes {
		return nil, fmt.Errorf("internal: permuting %d bytes as %d rows of %d", len(src), len(idx), rowBytes)
	}
	seen := make([]bool, len(idx))
	for _, r := range idx {
		if r < 0 || r >= len(idx) || seen[r] {
			return nil, fmt.Errorf("internal: bad row permutation")
		}
		seen[r] = true
	}
	return gatherRows(src, rowBytes, idx), nil
}
