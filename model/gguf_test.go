package model

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/safetensors"
	"github.com/qnnprep/qnnprep/testkit"
)

// writeModelGGUF writes tensors with metadata md (plus BOS/EOS as the
// tokenizer keys llama.cpp uses) to a GGUF file and returns its path.
func writeModelGGUF(t testing.TB, md gguf.Metadata, cfg Config, tensors []*Tensor) string {
	t.Helper()
	md = slices.Clone(md)
	if cfg.BOS >= 0 {
		md.Set("tokenizer.ggml.bos_token_id", uint32(cfg.BOS))
	}
	if cfg.EOS >= 0 {
		md.Set("tokenizer.ggml.eos_token_id", uint32(cfg.EOS))
	}
	w := &gguf.Writer{Metadata: md}
	for _, x := range tensors {
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: x.Name, Dims: x.Dims, Type: x.Type, Data: x})
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.WriteFile(path, w); err != nil {
		t.Fatal(err)
	}
	return path
}

func tinyLlama3() *hfCkpt {
	c := newCkpt(map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"vocab_size": 32, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1,
		"num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64,
		"rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": false,
		"rope_scaling": map[string]any{
			"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
			"original_max_position_embeddings": 8192,
		},
		"bos_token_id": 1, "eos_token_id": []int{2, 3},
	})
	c.common("model.", 1, 16, 24, 32, safetensors.F32, false)
	c.attention("model.layers.0.", 16, 2, 1, 8, safetensors.F32, false, false, false)
	return c
}

type namedCkpt struct {
	name string
	dir  func(t *testing.T) string
}

func allCheckpoints() []namedCkpt {
	w := func(f func() *hfCkpt) func(t *testing.T) string {
		return func(t *testing.T) string { return f().write(t) }
	}
	return []namedCkpt{
		{"stories260K", func(t *testing.T) string { return testkit.Stories(t, "hf") }},
		{"llama3", w(tinyLlama3)},
		{"qwen2", w(tinyQwen2)},
		{"qwen3", w(tinyQwen3)},
		{"qwen3next", w(tinyQwen3Next)},
		{"qwen35", w(tinyQwen35)},
	}
}

// A model written as GGUF with GGUFMetadata and its canonical tensors
// opens as the same model: same Config, same tensors, same bytes.
func TestGGUFRoundTrip(t *testing.T) {
	for _, tc := range allCheckpoints() {
		t.Run(tc.name, func(t *testing.T) {
			h := mustOpen(t, tc.dir(t))
			g := mustOpen(t, writeModelGGUF(t, h.GGUFMetadata(), h.Config, h.Tensors))
			if !equalConfig(g.Config, h.Config) {
				t.Errorf("config\n got %+v\nwant %+v", g.Config, h.Config)
			}
			if len(g.Tensors) != len(h.Tensors) {
				t.Fatalf("%d tensors, want %d", len(g.Tensors), len(h.Tensors))
			}
			for i, ht := range h.Tensors {
				gt := g.Tensors[i]
				if gt.Name != ht.Name || !slices.Equal(gt.Dims, ht.Dims) || gt.Type != ht.Type {
					t.Fatalf("tensor %d: %s %v %v, want %s %v %v", i, gt.Name, gt.Dims, gt.Type, ht.Name, ht.Dims, ht.Type)
				}
				a, err := gt.Data()
				if err != nil {
					t.Fatal(err)
				}
				b, err := ht.Data()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a, b) {
					t.Errorf("%s: data differs", ht.Name)
				}
			}
		})
	}
}

// ConfigFromGGUF(GGUFMetadata()) gives back the Config, except the fields
// that live in the tensors or the tokenizer keys.
func TestConfigFromGGUFMetadata(t *testing.T) {
	for _, tc := range allCheckpoints() {
		t.Run(tc.name, func(t *testing.T) {
			h := mustOpen(t, tc.dir(t))
			got, err := ConfigFromGGUF(h.GGUFMetadata())
			if err != nil {
				t.Fatal(err)
			}
			want := h.Config
			want.TiedEmbeddings = false                 // output.weight absent
			want.QKVBias = want.Arch.Features().QKVBias // attn_q.bias present
			if want.RopeScaling.Type == RopeLlama3 {
				want.RopeFreqFactors = nil       // rope_freqs.weight
				want.RopeScaling = RopeScaling{} // recovered from it by Open
			}
			want.BOS, want.EOS = -1, -1 // tokenizer.ggml.*
			if !equalConfig(got, want) {
				t.Errorf("\n got %+v\nwant %+v", got, want)
			}
		})
	}
	// Layer kinds that are no interval go to attention.recurrent_layers.
	c := tinyQwen3Next()
	m := mustOpen(t, c.write(t))
	cfg := m.Config
	cfg.LayerKinds = []LayerKind{DeltaNet, Attention, Attention, DeltaNet}
	md := (&Model{Config: cfg}).GGUFMetadata()
	if _, ok := md.Get("qwen3next.full_attention_interval"); ok {
		t.Error("full_attention_interval written for an irregular layout")
	}
	got, err := ConfigFromGGUF(md)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.LayerKinds, cfg.LayerKinds) {
		t.Errorf("layer kinds %v, want %v", got.LayerKinds, cfg.LayerKinds)
	}
}

func TestGGUFMetadataKeys(t *testing.T) {
	m := mustOpen(t, tinyQwen35().write(t))
	md := m.GGUFMetadata()
	for key, want := range map[string]any{
		"general.architecture":                    "qwen35",
		"qwen35.block_count":                      uint32(3),
		"qwen35.embedding_length":                 uint32(q5H),
		"qwen35.attention.key_length":             uint32(16),
		"qwen35.attention.value_length":           uint32(16),
		"qwen35.attention.layer_norm_rms_epsilon": float32(1e-6),
		"qwen35.rope.freq_base":                   float32(1e7),
		"qwen35.rope.dimension_count":             uint32(8),
		"qwen35.rope.dimension_sections":          []int32{2, 1, 1, 0},
		"qwen35.ssm.conv_kernel":                  uint32(q5K),
		"qwen35.ssm.state_size":                   uint32(q5Dk),
		"qwen35.ssm.group_count":                  uint32(q5Hk),
		"qwen35.ssm.time_step_rank":               uint32(q5Hv),
		"qwen35.ssm.inner_size":                   uint32(q5Hv * q5Dv),
		"qwen35.full_attention_interval":          uint32(3),
	} {
		got, ok := md.Get(key)
		if !ok {
			t.Errorf("%s missing", key)
		} else if !equalAny(got, want) {
			t.Errorf("%s = %v (%T), want %v (%T)", key, got, got, want, want)
		}
	}
	if _, ok := md.Get("general.name"); !ok {
		t.Error("general.name missing")
	}
	for _, kv := range md {
		if len(kv.Key) >= 10 && kv.Key[:10] == "tokenizer." {
			t.Errorf("tokenizer key %s", kv.Key)
		}
	}
}

func equalAny(a, b any) bool {
	if x, ok := a.([]int32); ok {
		y, ok := b.([]int32)
		return ok && slices.Equal(x, y)
	}
	return a == b
}

// llama.cpp's qwen3next GGUFs keep in_proj_ba as ssm_ba (and older ones
// in_proj_qkvz as ssm_in); Open presents them split, like a HF checkpoint.
func TestQwen3NextLlamaCppLayout(t *testing.T) {
	c := tinyQwen3Next()
	h := mustOpen(t, c.write(t))
	var tensors []*Tensor
	for _, x := range h.Tensors {
		switch x.Name {
		case "blk.0.ssm_beta.weight", "blk.2.ssm_beta.weight":
			l := x.Name[:6]
			raw := c.get("model.layers." + l[4:5] + ".linear_attn.in_proj_ba.weight")
			tensors = append(tensors, NewTensor(l+"ssm_ba.weight", []int64{nxH, 2 * nxHv}, gguf.BF16, encode(raw.dtype, raw.vals)))
		case "blk.2.attn_qkv.weight":
			raw := c.get("model.layers.2.linear_attn.in_proj_qkvz.weight")
			tensors = append(tensors, NewTensor("blk.2.ssm_in.weight",
				[]int64{nxH, 2*nxHk*nxDk + 2*nxHv*nxDv}, gguf.BF16, encode(raw.dtype, raw.vals)))
		case "blk.0.ssm_alpha.weight", "blk.2.ssm_alpha.weight", "blk.2.attn_gate.weight":
		default:
			tensors = append(tensors, x)
		}
	}
	g := mustOpen(t, writeModelGGUF(t, h.GGUFMetadata(), h.Config, tensors))
	checkQwen3Next(t, g, c)
	if len(g.Tensors) != len(h.Tensors) {
		t.Errorf("%d tensors, want %d", len(g.Tensors), len(h.Tensors))
	}
}

// A qwen35 GGUF with an MTP block (block_count = layers + nextn) opens as
// the main stack; the MTP tensors are left out as on the HF side.
func TestQwen35GGUFWithMTP(t *testing.T) {
	h := mustOpen(t, tinyQwen35().write(t))
	md := h.GGUFMetadata()
	md.Set("qwen35.block_count", uint32(4))
	md.Set("qwen35.nextn_predict_layers", uint32(1))
	tensors := slices.Clone(h.Tensors)
	tensors = append(tensors,
		NewTensor("blk.3.nextn.eh_proj.weight", []int64{2 * q5H, q5H}, gguf.F32, make([]byte, 4*2*q5H*q5H)),
		NewTensor("blk.3.attn_norm.weight", []int64{q5H}, gguf.F32, make([]byte, 4*q5H)))
	g := mustOpen(t, writeModelGGUF(t, md, h.Config, tensors))
	if !equalConfig(g.Config, h.Config) {
		t.Errorf("config\n got %+v\nwant %+v", g.Config, h.Config)
	}
	if len(g.Tensors) != len(h.Tensors) {
		t.Errorf("%d tensors, want %d", len(g.Tensors), len(h.Tensors))
	}
}

// Llama 3 rope scaling becomes rope_freqs.weight as llama.cpp's converter
// writes it: 1 for short wavelengths, factor for long, interpolated between.
func TestLlama3RopeFactors(t *testing.T) {
	c := tinyLlama3()
	m := mustOpen(t, c.write(t))
	f := m.Config.RopeFreqFactors
	if len(f) != 4 {
		t.Fatalf("%d factors, want 4", len(f))
	}
	// head_dim 8, θ = 500000: wavelengths 2π·θ^(2i/8) = 6.3, 166, 4443, 117,000
	// against high_wl = 8192/4 = 2048 and low_wl = 8192/1.
	wl := 2 * math.Pi * math.Pow(500000, 0.5)
	s := (8192/wl - 1) / (4 - 1)
	want := []float64{1, 1, 1 / ((1-s)/8 + s), 8}
	for i := range f {
		if math.Abs(float64(f[i])-want[i]) > 1e-5*want[i] {
			t.Errorf("factor %d = %v, want %v", i, f[i], want[i])
		}
	}
	sameBits(t, "rope_freqs.weight", values(t, m, "rope_freqs.weight"), f)
	if m.Config.EOS != 2 || m.Config.BOS != 1 {
		t.Errorf("bos/eos %d/%d", m.Config.BOS, m.Config.EOS)
	}
	// New rebuilds a missing rope_freqs.weight from the Config.
	var without []*Tensor
	for _, x := range m.Tensors {
		if x.Name != "rope_freqs.weight" {
			without = append(without, x)
		}
	}
	n, err := New(m.Config, without)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "New rope_freqs.weight", values(t, n, "rope_freqs.weight"), f)
}

func TestNew(t *testing.T) {
	m := mustOpen(t, tinyQwen35().write(t))
	// Any order in, canonical order out.
	shuffled := slices.Clone(m.Tensors)
	slices.Reverse(shuffled)
	n, err := New(m.Config, shuffled)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n.Tensors {
		if n.Tensors[i] != m.Tensors[i] {
			t.Fatalf("tensor %d is %s, want %s", i, n.Tensors[i].Name, m.Tensors[i].Name)
		}
	}
	if v, _ := n.Metadata.String("general.architecture"); v != "qwen35" {
		t.Errorf("metadata architecture %q", v)
	}
	// An in-memory tensor of the wrong size fails on Data, not with a panic.
	bad := NewTensor("x", []int64{4, 2}, gguf.F32, make([]byte, 7))
	if _, err := bad.Data(); err == nil {
		t.Error("short data accepted")
	}
	if _, err := bad.Float32(); err == nil {
		t.Error("short data accepted by Float32")
	}
}
