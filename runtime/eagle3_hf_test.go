package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/safetensors"
)

// recorder keeps every proposal a drafter makes.
type recorder struct {
	Drafter
	props [][]int32
}

func (r *recorder) Propose(last int32, k int) ([]int32, error) {
	d, err := r.Drafter.Propose(last, k)
	r.props = append(r.props, d)
	return d, err
}

// eagle3TestConfig is the config.json of randomEagle3's heads for a
// target of the given hidden size and vocabulary.
func eagle3TestConfig(hidden, vocab int) string {
	return fmt.Sprintf(`{"architectures":["LlamaForCausalLMEagle3"],"hidden_size":%d,"intermediate_size":256,"num_attention_heads":4,
"num_key_value_heads":2,"head_dim":32,"rms_norm_eps":1e-5,"rope_theta":10000,"rope_scaling":null,"num_hidden_layers":1,
"vocab_size":%d,"draft_vocab_size":64,"target_hidden_size":%d,"eagle_config":{"eagle_aux_hidden_state_layer_ids":[0,1,2]}}`, hidden, vocab, hidden)
}

// writeEagle3HF writes the head (GGUF-layout tensors ts) in Hugging Face
// form into dir (SafeAILab names, q/k rows in rotate-half order, d2t as
// offsets, config.json conf) and returns its tensors as F32 GGUF ones.
//
// With a d2t it also writes t2d, the BOOL mask of the vocab target ids
// d2t maps to.
func writeEagle3HF(t testing.TB, dir string, ecfg Eagle3Config, ts []*model.Tensor, conf string, vocab int) []*model.Tensor {
	t.Helper()
	D := ecfg.HeadDim
	var ggufTs []*model.Tensor
	w := &safetensors.Writer{}
	hfName := map[string]string{
		e3FC: "fc.weight", e3InNorm: "midlayer.input_layernorm.weight", e3HidNorm: "midlayer.hidden_norm.weight",
		e3Q: "midlayer.self_attn.q_proj.weight", e3K: "midlayer.self_attn.k_proj.weight", e3V: "midlayer.self_attn.v_proj.weight",
		e3O: "midlayer.self_attn.o_proj.weight", e3PostNorm: "midlayer.post_attention_layernorm.weight",
		e3Gate: "midlayer.mlp.gate_proj.weight", e3Up: "midlayer.mlp.up_proj.weight", e3Down: "midlayer.mlp.down_proj.weight",
		e3Norm: "norm.weight", e3Head: "lm_head.weight",
	}
	f32bytes := func(v []float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	for _, tt := range ts {
		if tt.Name == e3D2T {
			abs, _ := tt.Data()
			off := make([]byte, len(abs))
			for i := 0; i < len(abs)/8; i++ {
				binary.LittleEndian.PutUint64(off[8*i:], uint64(int64(binary.LittleEndian.Uint64(abs[8*i:]))-int64(i)))
			}
			ggufTs = append(ggufTs, tt)
			w.Tensors = append(w.Tensors, safetensors.WriterTensor{Name: "d2t", Dtype: safetensors.I64, Shape: []int64{int64(len(abs) / 8)}, Data: safetensors.Bytes(off)})
			mask := make([]byte, vocab)
			for i := 0; i < len(abs)/8; i++ {
				mask[binary.LittleEndian.Uint64(abs[8*i:])] = 1
			}
			w.Tensors = append(w.Tensors, safetensors.WriterTensor{Name: "t2d", Dtype: safetensors.BOOL, Shape: []int64{int64(vocab)}, Data: safetensors.Bytes(mask)})
			continue
		}
		v, err := tt.Float32()
		if err != nil {
			t.Fatal(err)
		}
		hf := v
		if tt.Name == e3Q || tt.Name == e3K {
			// GGUF row 2i+j of a head is HF row j·D/2+i.
			cols := int(tt.Dims[0])
			hf = make([]float32, len(v))
			for r := 0; r < len(v)/cols; r++ {
				h, rr := r/D, r%D
				src := h*D + (rr%2)*D/2 + rr/2
				copy(hf[src*cols:(src+1)*cols], v[r*cols:(r+1)*cols])
			}
		}
		ggufTs = append(ggufTs, model.NewTensor(tt.Name, tt.Dims, gguf.F32, f32bytes(v)))
		shape := make([]int64, len(tt.Dims))
		for i, d := range tt.Dims {
			shape[len(shape)-1-i] = d
		}
		w.Tensors = append(w.Tensors, safetensors.WriterTensor{Name: hfName[tt.Name], Dtype: safetensors.F32, Shape: shape, Data: safetensors.Bytes(f32bytes(hf))})
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), w); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return ggufTs
}

// TestEagle3HF: the same head written in Hugging Face form (SafeAILab
// names, q/k rows in rotate-half order, d2t as offsets, config.json) and
// given as GGUF-layout tensors (q/k rows permuted for NORM rope, absolute
// d2t) proposes the same tokens.
func TestEagle3HF(t *testing.T) {
	cfg, target := specTarget(t, model.Llama, 160)
	ecfg, ts := randomEagle3(t, target, 12)
	dir := t.TempDir()
	conf := eagle3TestConfig(cfg.Hidden, cfg.VocabSize)
	ggufTs := writeEagle3HF(t, dir, ecfg, ts, conf, cfg.VocabSize)
	hf, err := LoadEagle3HF(target, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	if c := hf.Config(); c.ExtractLayers != [3]int{0, 1, 2} || !c.RopeNeox || c.DraftVocab != 64 {
		t.Fatalf("config %+v", c)
	}
	ecfg.ExtractLayers = [3]int{0, 1, 2}
	mem := must(NewEagle3(target, ecfg, ggufTs))
	for i, p := range specPrompts(cfg.VocabSize)[:4] {
		a, b := &recorder{Drafter: hf.Drafter()}, &recorder{Drafter: mem.Drafter()}
		ga, _, err := target.Speculate(context.Background(), a, p, 64, 3)
		if err != nil {
			t.Fatal(err)
		}
		gb, _, err := target.Speculate(context.Background(), b, p, 64, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameTokens(ga, gb); err != nil {
			t.Fatal(err)
		}
		if len(a.props) != len(b.props) {
			t.Fatalf("prompt %d: %d and %d windows", i, len(a.props), len(b.props))
		}
		for j := range a.props {
			if err := sameTokens(a.props[j], b.props[j]); err != nil {
				t.Fatalf("prompt %d, window %d: HF and GGUF heads propose differently: %v", i, j, err)
			}
		}
	}
	// rope_scaling is refused, not silently ignored.
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(strings.Replace(conf, `"rope_scaling":null`, `"rope_scaling":{"rope_type":"llama3","factor":8}`, 1)), 0o644)
	if _, err := LoadEagle3HF(target, dir); err == nil || !strings.Contains(err.Error(), "rope_scaling") {
		t.Fatalf("rope_scaling: %v", err)
	}
}

// FuzzEagle3GGUF: any bytes either load as an EAGLE-3 head for a tiny
// target or give an error; never a panic or an unchecked allocation.
func FuzzEagle3GGUF(f *testing.F) {
	_, target := specTarget(f, model.Llama, 64)
	cfg, ts := randomEagle3(f, target, 8)
	w := eagle3Writer(cfg, ts)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	good := buf.Bytes()
	f.Add(good)
	f.Add(good[:len(good)/2])
	bad := bytes.Replace(append([]byte(nil), good...), []byte("eagle3.target_layers"), []byte("eagle3.target_layerz"), 1)
	f.Add(bad)
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := gguf.Parse(bytes.NewReader(b), int64(len(b)), "fuzz.gguf")
		if err != nil {
			return
		}
		h, err := eagle3FromGGUF(target, g)
		if err != nil {
			return
		}
		d := h.Drafter()
		prompt := []int32{1, 2, 3}
		feats := make([][]float32, 3)
		for i := range feats {
			feats[i] = make([]float32, 3*target.Hidden())
		}
		if err := d.Start(prompt, feats); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Propose(4, 2); err != nil {
			t.Fatal(err)
		}
	})
}

// An HF head's config.json with a missing or absurd size is refused when
// read, naming the key: convert writes a GGUF from these sizes before
// anything else checks them.
func TestEagle3HFConfigSizes(t *testing.T) {
	good := eagle3TestConfig(64, 512)
	if _, err := parseEagle3HFConfig([]byte(good), "head", 4); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"head_dim":32`, `"head_dim":0`, ""}, // hidden / heads
		{`"hidden_size":64`, `"hidden_size":-64`, "hidden_size -64, want 1…"},
		{`"num_key_value_heads":2`, `"num_key_value_heads":0`, ""}, // the heads
		{`"intermediate_size":256`, `"intermediate_size":0`, "intermediate_size 0, want 1…"},
		{`"draft_vocab_size":64`, `"draft_vocab_size":-1`, "draft_vocab_size -1"},
		// More heads than hidden dims, no head_dim: hidden / heads is 0.
		{`"num_attention_heads":4`, `"num_attention_heads":100`, "head_dim 0, want 1…"},
	} {
		conf := strings.Replace(good, c.from, c.to, 1)
		if c.from == `"num_attention_heads":4` {
			conf = strings.Replace(conf, `"head_dim":32`, `"head_dim":0`, 1)
		}
		_, err := parseEagle3HFConfig([]byte(conf), "head", 4)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.to, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), "head: config.json: "+c.want)):
			t.Errorf("%s: got %v, want %q", c.to, err, c.want)
		}
	}
}

// FuzzEagle3HFConfig: no config.json panics the reader; what it accepts
// has positive sizes.
func FuzzEagle3HFConfig(f *testing.F) {
	f.Add([]byte(eagle3TestConfig(64, 512)), 4)
	f.Add([]byte(`{"hidden_size":8,"num_attention_heads":16,"intermediate_size":1,"transformer_layer_config":{"hidden_size":1}}`), 0)
	f.Add([]byte(`{"hidden_size":64,"num_attention_heads":4,"intermediate_size":8,"eagle_aux_hidden_state_layer_ids":[1,2]}`), 3)
	f.Fuzz(func(t *testing.T, b []byte, layers int) {
		cfg, err := parseEagle3HFConfig(b, "head", layers)
		if err != nil {
			return
		}
		if cfg.Hidden <= 0 || cfg.FFN <= 0 || cfg.Heads <= 0 || cfg.KVHeads <= 0 || cfg.HeadDim <= 0 || cfg.DraftVocab < 0 {
			t.Fatalf("accepted sizes %+v", cfg)
		}
	})
}
