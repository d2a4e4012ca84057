package model

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/safetensors"
)

// Tiny synthetic Hugging Face checkpoints, written with the safetensors
// writer. Values are random but exactly representable in their dtype, so
// expected canonical values can be computed in the test from the formulas.

type hfTensor struct {
	name  string
	dtype safetensors.Dtype
	shape []int64 // PyTorch order
	vals  []float32
}

type hfCkpt struct {
	config  map[string]any
	tensors []*hfTensor
	rng     *rand.Rand
	// parts holds values the test composed a fused tensor from
	// (Qwen3-Next in_proj_qkvz/ba), keyed "layer.part".
	parts map[string][]float32
}

func newCkpt(config map[string]any) *hfCkpt {
	return &hfCkpt{config: config, rng: rand.New(rand.NewPCG(1, 2)), parts: map[string][]float32{}}
}

func roundTo(d safetensors.Dtype, v float32) float32 {
	switch d {
	case safetensors.BF16:
		return half.BF16ToF32(half.F32ToBF16(v))
	case safetensors.F16:
		return half.F16ToF32(half.F32ToF16(v))
	}
	return v
}

func (c *hfCkpt) random(d safetensors.Dtype, n int64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = roundTo(d, float32(c.rng.Float64()*2-1))
	}
	return v
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	return n
}

// add adds a tensor of random values.
func (c *hfCkpt) add(name string, d safetensors.Dtype, shape ...int64) *hfTensor {
	return c.addVals(name, d, c.random(d, numel(shape)), shape...)
}

func (c *hfCkpt) addVals(name string, d safetensors.Dtype, vals []float32, shape ...int64) *hfTensor {
	t := &hfTensor{name: name, dtype: d, shape: shape, vals: vals}
	c.tensors = append(c.tensors, t)
	return t
}

func (c *hfCkpt) get(name string) *hfTensor {
	for _, t := range c.tensors {
		if t.name == name {
			return t
		}
	}
	return nil
}

func (c *hfCkpt) remove(name string) {
	c.tensors = slices.DeleteFunc(c.tensors, func(t *hfTensor) bool { return t.name == name })
}

func encode(d safetensors.Dtype, vals []float32) []byte {
	var b []byte
	for _, v := range vals {
		switch d {
		case safetensors.F32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		case safetensors.F16:
			b = binary.LittleEndian.AppendUint16(b, half.F32ToF16(v))
		case safetensors.BF16:
			b = binary.LittleEndian.AppendUint16(b, half.F32ToBF16(v))
		case safetensors.I8:
			b = append(b, byte(int8(v)))
		}
	}
	return b
}

// write writes config.json and the safetensors into a new directory.
func (c *hfCkpt) write(t testing.TB) string { return c.writeShards(t, 0) }

// writeShards writes the safetensors as n shards with an index (n > 0),
// or as one model.safetensors.
func (c *hfCkpt) writeShards(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	js, err := json.MarshalIndent(c.config, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	w := &safetensors.Writer{Metadata: map[string]string{"format": "pt"}}
	for _, x := range c.tensors {
		w.Tensors = append(w.Tensors, safetensors.WriterTensor{
			Name: x.name, Dtype: x.dtype, Shape: x.shape, Data: safetensors.Bytes(encode(x.dtype, x.vals)),
		})
	}
	if n > 0 {
		if err := safetensors.WriteSharded(dir, w, n); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), w); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dense adds the tensors every layer of every architecture has.
func (c *hfCkpt) common(prefix string, layers, hidden, ffn, vocab int64, d safetensors.Dtype, tied bool) {
	c.add(prefix+"embed_tokens.weight", d, vocab, hidden)
	c.add(prefix+"norm.weight", d, hidden)
	if !tied {
		c.add("lm_head.weight", d, vocab, hidden)
	}
	for i := range layers {
		p := prefix + "layers." + itoa(i) + "."
		c.add(p+"input_layernorm.weight", d, hidden)
		c.add(p+"post_attention_layernorm.weight", d, hidden)
		c.add(p+"mlp.gate_proj.weight", d, ffn, hidden)
		c.add(p+"mlp.up_proj.weight", d, ffn, hidden)
		c.add(p+"mlp.down_proj.weight", d, hidden, ffn)
	}
}

func itoa[T ~int | ~int64](i T) string { return jsonNum(int64(i)) }
func jsonNum(i int64) string           { b, _ := json.Marshal(i); return string(b) }

// attention adds a full-attention block; gated doubles q_proj.
func (c *hfCkpt) attention(p string, hidden, heads, kv, hd int64, d safetensors.Dtype, gated, bias, qkNorm bool) {
	q := heads * hd
	if gated {
		q *= 2
	}
	c.add(p+"self_attn.q_proj.weight", d, q, hidden)
	c.add(p+"self_attn.k_proj.weight", d, kv*hd, hidden)
	c.add(p+"self_attn.v_proj.weight", d, kv*hd, hidden)
	c.add(p+"self_attn.o_proj.weight", d, hidden, heads*hd)
	if bias {
		c.add(p+"self_attn.q_proj.bias", d, q)
		c.add(p+"self_attn.k_proj.bias", d, kv*hd)
		c.add(p+"self_attn.v_proj.bias", d, kv*hd)
	}
	if qkNorm {
		c.add(p+"self_attn.q_norm.weight", d, hd)
		c.add(p+"self_attn.k_norm.weight", d, hd)
	}
}

func tinyQwen3() *hfCkpt {
	c := newCkpt(map[string]any{
		"architectures": []string{"Qwen3ForCausalLM"}, "model_type": "qwen3",
		"vocab_size": 32, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
		"max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
		"tie_word_embeddings": true, "bos_token_id": nil, "eos_token_id": []int{5, 6},
		"attention_bias": false, "torch_dtype": "bfloat16",
	})
	c.common("model.", 2, 16, 24, 32, safetensors.BF16, true)
	for i := range 2 {
		c.attention("model.layers."+itoa(i)+".", 16, 4, 2, 8, safetensors.BF16, false, false, true)
	}
	return c
}

func tinyQwen2() *hfCkpt {
	c := newCkpt(map[string]any{
		"architectures": []string{"Qwen2ForCausalLM"}, "model_type": "qwen2",
		"vocab_size": 32, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1,
		"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
		"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false,
		"use_sliding_window": false, "bos_token_id": 1, "eos_token_id": 2,
	})
	c.common("model.", 1, 16, 24, 32, safetensors.F16, false)
	c.attention("model.layers.0.", 16, 4, 2, 4, safetensors.F16, false, true, false)
	return c
}

// Qwen3-Next: 4 layers, every 2nd full attention; Hk 2, Hv 4 (r = 2),
// Dk 4, Dv 3, K 3.
const (
	nxH, nxHk, nxHv, nxDk, nxDv, nxK = 16, 2, 4, 4, 3, 3
)

func tinyQwen3Next() *hfCkpt {
	c := newCkpt(map[string]any{
		"architectures": []string{"Qwen3NextForCausalLM"}, "model_type": "qwen3_next",
		"vocab_size": 32, "hidden_size": nxH, "intermediate_size": 24, "num_hidden_layers": 4,
		"num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
		"max_position_embeddings": 128, "rms_norm_eps": 1e-6, "rope_theta": 10000000.0,
		"partial_rotary_factor": 0.25, "full_attention_interval": 2,
		"linear_conv_kernel_dim": nxK, "linear_key_head_dim": nxDk, "linear_value_head_dim": nxDv,
		"linear_num_key_heads": nxHk, "linear_num_value_heads": nxHv,
		"num_experts": 0, "tie_word_embeddings": false, "bos_token_id": 3, "eos_token_id": 4,
	})
	d := safetensors.BF16
	c.common("model.", 4, nxH, 24, 32, d, false)
	r := nxHv / nxHk
	for _, i := range []int{0, 2} {
		p := "model.layers." + itoa(i) + ".linear_attn."
		L := itoa(i) + "."
		// Compose in_proj_qkvz and in_proj_ba from separate parts the
		// way Qwen3-Next groups them by key head.
		q := c.random(d, nxHk*nxDk*nxH)
		k := c.random(d, nxHk*nxDk*nxH)
		v := c.random(d, nxHv*nxDv*nxH)
		z := c.random(d, nxHv*nxDv*nxH)
		bb := c.random(d, nxHv*nxH)
		aa := c.random(d, nxHv*nxH)
		c.parts[L+"q"], c.parts[L+"k"], c.parts[L+"v"], c.parts[L+"z"] = q, k, v, z
		c.parts[L+"b"], c.parts[L+"a"] = bb, aa
		var qkvz, ba []float32
		rowsOf := func(m []float32, from, n int) []float32 { return m[from*nxH : (from+n)*nxH] }
		for g := range nxHk {
			qkvz = append(qkvz, rowsOf(q, g*nxDk, nxDk)...)
			qkvz = append(qkvz, rowsOf(k, g*nxDk, nxDk)...)
			qkvz = append(qkvz, rowsOf(v, g*r*nxDv, r*nxDv)...)
			qkvz = append(qkvz, rowsOf(z, g*r*nxDv, r*nxDv)...)
			ba = append(ba, rowsOf(bb, g*r, r)...)
			ba = append(ba, rowsOf(aa, g*r, r)...)
		}
		c.addVals(p+"in_proj_qkvz.weight", d, qkvz, 2*nxHk*nxDk+2*nxHv*nxDv, nxH)
		c.addVals(p+"in_proj_ba.weight", d, ba, 2*nxHv, nxH)
		conv := int64(2*nxHk*nxDk + nxHv*nxDv)
		c.add(p+"conv1d.weight", d, conv, 1, nxK)
		c.add(p+"dt_bias", d, nxHv)
		c.add(p+"A_log", safetensors.F32, nxHv)
		c.add(p+"norm.weight", safetensors.F32, nxDv)
		c.add(p+"out_proj.weight", d, nxH, nxHv*nxDv)
	}
	for _, i := range []int{1, 3} {
		c.attention("model.layers."+itoa(i)+".", nxH, 2, 1, 8, d, true, false, true)
	}
	c.add("mtp.fc.weight", d, nxH, 2*nxH) // ignored
	return c
}

// Qwen3.5: 3 layers [linear, linear, full]; Hk 2, Hv 6 (r = 3), Dk 4,
// Dv 2, K 4; multimodal wrapper with text_config and
// model.language_model.* names.
const (
	q5H, q5Hk, q5Hv, q5Dk, q5Dv, q5K = 12, 2, 6, 4, 2, 4
)

func tinyQwen35() *hfCkpt {
	c := newCkpt(map[string]any{
		"architectures": []string{"Qwen3_5ForConditionalGeneration"}, "model_type": "qwen3_5",
		"tie_word_embeddings": true,
		"text_config": map[string]any{
			"model_type": "qwen3_5_text", "vocab_size": 40, "hidden_size": q5H, "intermediate_size": 20,
			"num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
			"max_position_embeddings": 256, "rms_norm_eps": 1e-6,
			"layer_types":            []string{"linear_attention", "linear_attention", "full_attention"},
			"linear_conv_kernel_dim": q5K, "linear_key_head_dim": q5Dk, "linear_value_head_dim": q5Dv,
			"linear_num_key_heads": q5Hk, "linear_num_value_heads": q5Hv,
			"rope_parameters": map[string]any{
				"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.5,
				"mrope_interleaved": true, "mrope_section": []int{2, 1, 1},
			},
			"eos_token_id": 7, "mtp_num_hidden_layers": 1, "attn_output_gate": true,
		},
		"vision_config": map[string]any{"depth": 1},
	})
	d := safetensors.BF16
	pre := "model.language_model."
	c.common(pre, 3, q5H, 20, 40, d, true)
	for _, i := range []int{0, 1} {
		p := pre + "layers." + itoa(i) + ".linear_attn."
		conv := int64(2*q5Hk*q5Dk + q5Hv*q5Dv)
		c.add(p+"in_proj_qkv.weight", d, conv, q5H)
		c.add(p+"in_proj_z.weight", d, q5Hv*q5Dv, q5H)
		c.add(p+"in_proj_b.weight", d, q5Hv, q5H)
		c.add(p+"in_proj_a.weight", d, q5Hv, q5H)
		c.add(p+"conv1d.weight", d, conv, 1, q5K)
		c.add(p+"dt_bias", d, q5Hv)
		c.add(p+"A_log", safetensors.F32, q5Hv)
		c.add(p+"norm.weight", safetensors.F32, q5Dv)
		c.add(p+"out_proj.weight", d, q5H, q5Hv*q5Dv)
	}
	c.attention(pre+"layers.2.", q5H, 2, 1, 16, d, true, false, true)
	c.add("model.visual.blocks.0.attn.qkv.weight", d, 6, 4) // ignored
	c.add("mtp.fc.weight", d, q5H, 2*q5H)                   // ignored
	c.add("mtp.layers.0.input_layernorm.weight", d, q5H)    // ignored
	return c
}

// values returns the canonical tensor's values (failing the test on error).
func values(t *testing.T, m *Model, name string) []float32 {
	t.Helper()
	x := m.Tensor(name)
	if x == nil {
		t.Fatalf("no tensor %s", name)
	}
	v, err := x.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// checkPassThrough checks that every canonical tensor whose HF source is
// named in pass holds the HF bytes unchanged, in the HF dtype.
func checkPassThrough(t *testing.T, m *Model, c *hfCkpt, pass map[string]string) {
	t.Helper()
	for canon, src := range pass {
		ht := c.get(src)
		if ht == nil {
			t.Fatalf("test bug: no HF tensor %s", src)
		}
		x := m.Tensor(canon)
		if x == nil {
			t.Errorf("missing %s", canon)
			continue
		}
		want := slices.Clone(ht.shape)
		slices.Reverse(want)
		if len(want) == 3 && want[1] == 1 { // conv1d squeeze
			want = []int64{want[0], want[2]}
		}
		if !slices.Equal(x.Dims, want) {
			t.Errorf("%s: dims %v, want %v", canon, x.Dims, want)
		}
		b, err := x.Data()
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(encode(ht.dtype, ht.vals)) {
			t.Errorf("%s: bytes differ from %s", canon, src)
		}
	}
}

func TestQwen3Synthetic(t *testing.T) {
	c := tinyQwen3()
	m := mustOpen(t, c.write(t))
	want := Config{
		Arch: Qwen3, VocabSize: 32, Hidden: 16, Layers: 2, FFN: 24, Heads: 4, KVHeads: 2, HeadDim: 8,
		ContextLength: 64, RMSEps: 1e-6, RopeTheta: 1e6, RopeDim: 8, RopeNeox: true,
		TiedEmbeddings: true, QKNorm: true, LayerKinds: []LayerKind{Attention, Attention}, BOS: -1, EOS: 5,
	}
	if !equalConfig(m.Config, want) {
		t.Errorf("config\n got %+v\nwant %+v", m.Config, want)
	}
	if len(m.Tensors) != 2+2*11 || m.Tensor("output.weight") != nil {
		t.Errorf("%d tensors (output.weight %v)", len(m.Tensors), m.Tensor("output.weight") != nil)
	}
	pass := map[string]string{"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
	for i := range 2 {
		p, b := "model.layers."+itoa(i)+".", "blk."+itoa(i)+"."
		for canon, src := range map[string]string{
			"attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
			"attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
			"attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
			"attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
			"ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
			"ffn_down.weight": "mlp.down_proj.weight",
		} {
			pass[b+canon] = p + src
		}
	}
	checkPassThrough(t, m, c, pass)
	if x := m.Tensor("blk.0.attn_q.weight"); !slices.Equal(x.Dims, []int64{16, 32}) || x.Type != gguf.BF16 {
		t.Errorf("attn_q: %v %v", x.Dims, x.Type)
	}
}

func TestQwen2Biases(t *testing.T) {
	c := tinyQwen2()
	m := mustOpen(t, c.write(t))
	if !m.Config.QKVBias || m.Config.TiedEmbeddings || m.Config.HeadDim != 4 || m.Config.QKNorm {
		t.Errorf("config %+v", m.Config)
	}
	checkPassThrough(t, m, c, map[string]string{
		"blk.0.attn_q.bias":     "model.layers.0.self_attn.q_proj.bias",
		"blk.0.attn_k.bias":     "model.layers.0.self_attn.k_proj.bias",
		"blk.0.attn_v.bias":     "model.layers.0.self_attn.v_proj.bias",
		"output.weight":         "lm_head.weight",
		"blk.0.ffn_norm.weight": "model.layers.0.post_attention_layernorm.weight",
	})
}

func TestQwen3NextSynthetic(t *testing.T) {
	c := tinyQwen3Next()
	m := mustOpen(t, c.write(t))
	want := Config{
		Arch: Qwen3Next, VocabSize: 32, Hidden: nxH, Layers: 4, FFN: 24, Heads: 2, KVHeads: 1, HeadDim: 8,
		ContextLength: 128, RMSEps: 1e-6, RopeTheta: 1e7, RopeDim: 2, RopeNeox: true,
		QKNorm: true, AttnOutputGate: true,
		LayerKinds: []LayerKind{DeltaNet, Attention, DeltaNet, Attention},
		ConvKernel: nxK, SSMKeyHeads: nxHk, SSMValueHeads: nxHv, SSMKeyDim: nxDk, SSMValueDim: nxDv,
		BOS: 3, EOS: 4,
	}
	if !equalConfig(m.Config, want) {
		t.Errorf("config\n got %+v\nwant %+v", m.Config, want)
	}
	checkQwen3Next(t, m, c)
}

// checkQwen3Next checks a qwen3next model (from HF or GGUF) against the
// checkpoint c element by element.
func checkQwen3Next(t *testing.T, m *Model, c *hfCkpt) {
	t.Helper()
	plus1 := func(v []float32) []float32 {
		out := make([]float32, len(v))
		for i := range v {
			out[i] = v[i] + 1
		}
		return out
	}
	// Zero-centred norms: +1, stored F32 — every *norm.weight except
	// linear_attn.norm.
	norms := map[string]string{"output_norm.weight": "model.norm.weight"}
	for i := range 4 {
		p, b := "model.layers."+itoa(i)+".", "blk."+itoa(i)+"."
		norms[b+"attn_norm.weight"] = p + "input_layernorm.weight"
		norms[b+"post_attention_norm.weight"] = p + "post_attention_layernorm.weight"
		if i%2 == 1 {
			norms[b+"attn_q_norm.weight"] = p + "self_attn.q_norm.weight"
			norms[b+"attn_k_norm.weight"] = p + "self_attn.k_norm.weight"
		}
		if m.Tensor(b+"ffn_norm.weight") != nil {
			t.Errorf("%sffn_norm.weight present; qwen3next uses post_attention_norm", b)
		}
	}
	for canon, src := range norms {
		if m.Tensor(canon).Type != gguf.F32 {
			t.Errorf("%s: type %v, want F32", canon, m.Tensor(canon).Type)
		}
		sameBits(t, canon, values(t, m, canon), plus1(c.get(src).vals))
	}
	for _, i := range []int{0, 2} {
		p, b, L := "model.layers."+itoa(i)+".linear_attn.", "blk."+itoa(i)+".", itoa(i)+"."
		// De-interleaved projections: attn_qkv = q ‖ k ‖ v, attn_gate = z,
		// beta = b, alpha = a, all in grouped value-head order.
		qkv := slices.Concat(c.parts[L+"q"], c.parts[L+"k"], c.parts[L+"v"])
		sameBits(t, b+"attn_qkv.weight", values(t, m, b+"attn_qkv.weight"), qkv)
		sameBits(t, b+"attn_gate.weight", values(t, m, b+"attn_gate.weight"), c.parts[L+"z"])
		sameBits(t, b+"ssm_beta.weight", values(t, m, b+"ssm_beta.weight"), c.parts[L+"b"])
		sameBits(t, b+"ssm_alpha.weight", values(t, m, b+"ssm_alpha.weight"), c.parts[L+"a"])
		if d := m.Tensor(b + "attn_qkv.weight").Dims; !slices.Equal(d, []int64{nxH, 2*nxHk*nxDk + nxHv*nxDv}) {
			t.Errorf("attn_qkv dims %v", d)
		}
		// ssm_a = −exp(A_log), F32.
		alog := c.get(p + "A_log").vals
		wantA := make([]float32, len(alog))
		for h, x := range alog {
			wantA[h] = float32(-math.Exp(float64(x)))
		}
		sameBits(t, b+"ssm_a", values(t, m, b+"ssm_a"), wantA)
		checkPassThrough(t, m, c, map[string]string{
			b + "ssm_conv1d.weight": p + "conv1d.weight",
			b + "ssm_dt.bias":       p + "dt_bias",
			b + "ssm_norm.weight":   p + "norm.weight", // gated norm: no +1
			b + "ssm_out.weight":    p + "out_proj.weight",
		})
	}
	checkPassThrough(t, m, c, map[string]string{
		"blk.1.attn_q.weight": "model.layers.1.self_attn.q_proj.weight",
		"output.weight":       "lm_head.weight",
	})
	if x := m.Tensor("blk.1.attn_q.weight"); x.Dims[1] != 2*2*8 {
		t.Errorf("gated attn_q dims %v", x.Dims)
	}
}

func TestQwen35Synthetic(t *testing.T) {
	c := tinyQwen35()
	m := mustOpen(t, c.write(t))
	want := Config{
		Arch: Qwen35, VocabSize: 40, Hidden: q5H, Layers: 3, FFN: 20, Heads: 2, KVHeads: 1, HeadDim: 16,
		ContextLength: 256, RMSEps: 1e-6, RopeTheta: 1e7, RopeDim: 8, RopeNeox: true,
		MRopeSections: []int{2, 1, 1, 0}, TiedEmbeddings: true, QKNorm: true, AttnOutputGate: true,
		LayerKinds: []LayerKind{DeltaNet, DeltaNet, Attention},
		ConvKernel: q5K, SSMKeyHeads: q5Hk, SSMValueHeads: q5Hv, SSMKeyDim: q5Dk, SSMValueDim: q5Dv,
		SSMTiledHeads: true, BOS: -1, EOS: 7,
	}
	if !equalConfig(m.Config, want) {
		t.Errorf("config\n got %+v\nwant %+v", m.Config, want)
	}
	checkQwen35(t, m, c)

	// The same checkpoint in three shards with an index.
	sharded := mustOpen(t, c.writeShards(t, 3))
	if !equalConfig(sharded.Config, want) {
		t.Errorf("sharded config\n got %+v\nwant %+v", sharded.Config, want)
	}
	checkQwen35(t, sharded, c)
}

func checkQwen35(t *testing.T, m *Model, c *hfCkpt) {
	t.Helper()
	pre := "model.language_model."
	r := q5Hv / q5Hk
	keyRows := 2 * q5Hk * q5Dk
	// newHead is where grouped value head h = g·r + j lands: j·Hk + g, so
	// that value head h' uses key head h' mod Hk (llama.cpp's tiled order).
	newHead := func(h int) int { g, j := h/r, h%r; return j*q5Hk + g }
	for h := range q5Hv {
		if kh := newHead(h) % q5Hk; kh != h/r {
			t.Fatalf("test bug: head %d → %d uses key head %d, want %d", h, newHead(h), kh, h/r)
		}
	}
	for _, i := range []int{0, 1} {
		p, b := pre+"layers."+itoa(i)+".linear_attn.", "blk."+itoa(i)+"."
		// rows per value head, first value row, row length
		check := func(canon, src string, per, base, rowLen int, f func(float32) float32) {
			t.Helper()
			got, hf := values(t, m, canon), c.get(src).vals
			if len(got) != len(hf) {
				t.Fatalf("%s: %d values, want %d", canon, len(got), len(hf))
			}
			want := make([]float32, len(hf))
			copy(want, hf)
			for h := range q5Hv {
				for d := range per {
					from := (base + h*per + d) * rowLen
					to := (base + newHead(h)*per + d) * rowLen
					copy(want[to:to+rowLen], hf[from:from+rowLen])
				}
			}
			if f != nil {
				for k := range want {
					want[k] = f(want[k])
				}
			}
			sameBits(t, canon, got, want)
		}
		check(b+"attn_qkv.weight", p+"in_proj_qkv.weight", q5Dv, keyRows, q5H, nil)
		check(b+"attn_gate.weight", p+"in_proj_z.weight", q5Dv, 0, q5H, nil)
		check(b+"ssm_beta.weight", p+"in_proj_b.weight", 1, 0, q5H, nil)
		check(b+"ssm_alpha.weight", p+"in_proj_a.weight", 1, 0, q5H, nil)
		check(b+"ssm_conv1d.weight", p+"conv1d.weight", q5Dv, keyRows, q5K, nil)
		check(b+"ssm_dt.bias", p+"dt_bias", 1, 0, 1, nil)
		check(b+"ssm_a", p+"A_log", 1, 0, 1, func(x float32) float32 { return float32(-math.Exp(float64(x))) })
		if x := m.Tensor(b + "ssm_conv1d.weight"); !slices.Equal(x.Dims, []int64{q5K, int64(keyRows + q5Hv*q5Dv)}) {
			t.Errorf("conv1d dims %v", x.Dims)
		}
		// out_proj: the input columns move by value head.
		got, hf := values(t, m, b+"ssm_out.weight"), c.get(p+"out_proj.weight").vals
		cols := q5Hv * q5Dv
		for o := range q5H {
			for h := range q5Hv {
				for d := range q5Dv {
					if g, w := got[o*cols+newHead(h)*q5Dv+d], hf[o*cols+h*q5Dv+d]; g != w {
						t.Fatalf("ssm_out[%d][%d] = %v, want %v", o, newHead(h)*q5Dv+d, g, w)
					}
				}
			}
		}
		checkPassThrough(t, m, c, map[string]string{b + "ssm_norm.weight": p + "norm.weight"})
	}
	sameBits(t, "blk.2.attn_q_norm.weight", values(t, m, "blk.2.attn_q_norm.weight"),
		plusOne(c.get(pre+"layers.2.self_attn.q_norm.weight").vals))
	sameBits(t, "blk.1.post_attention_norm.weight", values(t, m, "blk.1.post_attention_norm.weight"),
		plusOne(c.get(pre+"layers.1.post_attention_layernorm.weight").vals))
	checkPassThrough(t, m, c, map[string]string{
		"token_embd.weight":   pre + "embed_tokens.weight",
		"blk.2.attn_q.weight": pre + "layers.2.self_attn.q_proj.weight",
	})
	for _, x := range m.Tensors {
		if x.Name == "output.weight" || len(x.Name) > 4 && x.Name[:4] == "blk." && blockOf(x.Name) >= 3 {
			t.Errorf("unexpected %s", x.Name)
		}
	}
}

func blockOf(name string) int { n, _ := blockIndex(name); return n }

func plusOne(v []float32) []float32 {
	out := make([]float32, len(v))
	for i := range v {
		out[i] = v[i] + 1
	}
	return out
}

// With Hk = Hv the qwen35 heads are not reordered (grouped = tiled).
func TestQwen35EqualHeadsNotReordered(t *testing.T) {
	c := newCkpt(nil)
	base := tinyQwen35()
	c.config = base.config
	tc := c.config["text_config"].(map[string]any)
	tc["linear_num_value_heads"] = q5Hk
	pre := "model.language_model."
	c.common(pre, 3, q5H, 20, 40, safetensors.F32, true)
	for _, i := range []int{0, 1} {
		p := pre + "layers." + itoa(i) + ".linear_attn."
		conv := int64(2*q5Hk*q5Dk + q5Hk*q5Dv)
		c.add(p+"in_proj_qkv.weight", safetensors.F32, conv, q5H)
		c.add(p+"in_proj_z.weight", safetensors.F32, q5Hk*q5Dv, q5H)
		c.add(p+"in_proj_b.weight", safetensors.F32, q5Hk, q5H)
		c.add(p+"in_proj_a.weight", safetensors.F32, q5Hk, q5H)
		c.add(p+"conv1d.weight", safetensors.F32, conv, 1, q5K)
		c.add(p+"dt_bias", safetensors.F32, q5Hk)
		c.add(p+"A_log", safetensors.F32, q5Hk)
		c.add(p+"norm.weight", safetensors.F32, q5Dv)
		c.add(p+"out_proj.weight", safetensors.F32, q5H, q5Hk*q5Dv)
	}
	c.attention(pre+"layers.2.", q5H, 2, 1, 16, safetensors.F32, true, false, true)
	m := mustOpen(t, c.write(t))
	if !m.Config.SSMTiledHeads {
		t.Error("qwen35 must report tiled heads")
	}
	pass := map[string]string{}
	for _, i := range []int{0, 1} {
		p, b := pre+"layers."+itoa(i)+".linear_attn.", "blk."+itoa(i)+"."
		for canon, src := range map[string]string{
			"attn_qkv.weight": "in_proj_qkv.weight", "attn_gate.weight": "in_proj_z.weight",
			"ssm_beta.weight": "in_proj_b.weight", "ssm_alpha.weight": "in_proj_a.weight",
			"ssm_conv1d.weight": "conv1d.weight", "ssm_dt.bias": "dt_bias", "ssm_out.weight": "out_proj.weight",
		} {
			pass[b+canon] = p + src
		}
	}
	checkPassThrough(t, m, c, pass)
}

// equalConfig compares configs treating nil and empty slices alike.
func equalConfig(a, b Config) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
