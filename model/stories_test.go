package model

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/safetensors"
	"github.com/qnnprep/qnnprep/testkit"
)

func mustOpen(t testing.TB, path string) *Model {
	t.Helper()
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// The stories260K GGUF (written by llama.cpp's llama2.c converter, NORM
// rope layout) and its Hugging Face export (q/k rows permuted for
// rotate-half rope) must be the same canonical model bit for bit: this is
// what proves the q/k un-permutation.
func TestStories260KGGUFEqualsHF(t *testing.T) {
	g := mustOpen(t, testkit.Stories(t, "stories260K-llamacpp.gguf"))
	h := mustOpen(t, testkit.Stories(t, "hf"))

	if g.Format != "gguf" || h.Format != "safetensors" {
		t.Errorf("formats %q, %q", g.Format, h.Format)
	}
	want := Config{
		Arch: Llama, VocabSize: 512, Hidden: 64, Layers: 5, FFN: 172, Heads: 8, KVHeads: 4, HeadDim: 8,
		ContextLength: 512, RMSEps: 1e-5, RopeTheta: 10000, RopeDim: 8, RopeNeox: false,
		TiedEmbeddings: true, LayerKinds: make([]LayerKind, 5), BOS: 1, EOS: 2,
	}
	if !reflect.DeepEqual(h.Config, want) {
		t.Errorf("HF config\n got %+v\nwant %+v", h.Config, want)
	}
	// The GGUF differs in two documented ways: the converter wrote
	// context_length 128, and an explicit output.weight (a copy of the
	// embedding), so it is not tied.
	gw := want
	gw.ContextLength = 128
	gw.TiedEmbeddings = false
	if !reflect.DeepEqual(g.Config, gw) {
		t.Errorf("GGUF config\n got %+v\nwant %+v", g.Config, gw)
	}

	if len(g.Tensors) != 48 || len(h.Tensors) != 47 {
		t.Fatalf("%d GGUF and %d HF tensors, want 48 and 47", len(g.Tensors), len(h.Tensors))
	}
	for _, ht := range h.Tensors {
		gt := g.Tensor(ht.Name)
		if gt == nil {
			t.Errorf("%s missing from the GGUF", ht.Name)
			continue
		}
		if !slices.Equal(gt.Dims, ht.Dims) || gt.Type != ht.Type {
			t.Errorf("%s: GGUF %v %v, HF %v %v", ht.Name, gt.Dims, gt.Type, ht.Dims, ht.Type)
			continue
		}
		gb, err := gt.Data()
		if err != nil {
			t.Fatal(err)
		}
		hb, err := ht.Data()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gb, hb) {
			t.Errorf("%s: data differs", ht.Name)
		}
	}
	// The GGUF's output.weight is the embedding, which the HF model ties.
	ob, _ := g.Tensor("output.weight").Data()
	eb, _ := h.Tensor("token_embd.weight").Data()
	if !bytes.Equal(ob, eb) {
		t.Error("GGUF output.weight differs from the HF embedding")
	}

	// The q rows really are permuted in the HF file: the raw HF bytes
	// differ from the canonical ones.
	st, err := safetensors.Open(testkit.Stories(t, "hf"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw, err := st.Data("model.layers.0.self_attn.q_proj.weight")
	if err != nil {
		t.Fatal(err)
	}
	canon, _ := h.Tensor("blk.0.attn_q.weight").Data()
	if bytes.Equal(raw, canon) {
		t.Error("blk.0.attn_q.weight: HF bytes equal canonical ones; the fixture should be permuted")
	}
}

func TestStories260KOrderAndMetadata(t *testing.T) {
	h := mustOpen(t, testkit.Stories(t, "hf"))
	specs := ExpectedTensors(h.Config)
	if len(specs) != len(h.Tensors) {
		t.Fatalf("%d specs, %d tensors", len(specs), len(h.Tensors))
	}
	for i, s := range specs {
		if h.Tensors[i].Name != s.Name {
			t.Fatalf("tensor %d is %s, want %s", i, h.Tensors[i].Name, s.Name)
		}
	}
	if h.Tensors[0].Name != "token_embd.weight" || h.Tensors[len(h.Tensors)-1].Name != "output_norm.weight" {
		t.Errorf("order: first %s, last %s", h.Tensors[0].Name, h.Tensors[len(h.Tensors)-1].Name)
	}

	g := mustOpen(t, testkit.Stories(t, "stories260K-llamacpp.gguf"))
	// Our metadata holds the file's hyper-parameter keys with the same
	// values (and adds the ones the converter left to defaults).
	md := g.GGUFMetadata()
	for _, kv := range g.Metadata {
		if len(kv.Key) < 6 || kv.Key[:6] != "llama." {
			continue
		}
		v, ok := md.Get(kv.Key)
		if !ok || !reflect.DeepEqual(v, kv.Value) {
			t.Errorf("%s: file %v (%T), GGUFMetadata %v (%T)", kv.Key, kv.Value, kv.Value, v, v)
		}
	}
}

// Open reads headers only; tensor bytes are produced on demand.
func BenchmarkOpenHF(b *testing.B) {
	dir := testkit.Stories(b, "hf")
	for b.Loop() {
		m, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}

func BenchmarkOpenGGUF(b *testing.B) {
	path := testkit.Stories(b, "stories260K-llamacpp.gguf")
	for b.Loop() {
		m, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}

// BenchmarkPermutedData measures the lazy llama q/k un-permutation of the
// HF fixture (all q and k tensors per iteration).
func BenchmarkPermutedData(b *testing.B) {
	m := mustOpen(b, testkit.Stories(b, "hf"))
	var n int64
	for b.Loop() {
		for i := range m.Config.Layers {
			for _, s := range []string{"attn_q.weight", "attn_k.weight"} {
				d, err := m.Tensor(blk(i, s)).Data()
				if err != nil {
					b.Fatal(err)
				}
				n += int64(len(d))
			}
		}
	}
	b.SetBytes(n / int64(b.N))
}
