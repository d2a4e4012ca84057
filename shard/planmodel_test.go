package shard

import (
	"os"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/testkit"
)

// TestPlanModelStories measures the stories260K fixture. Expected sizes come
// from its README: dim 64, hidden 172, 5 layers, 8 heads, 4 kv heads (head
// 8), vocab 512, all F32, an explicit output.weight, data from byte 14176.
func TestPlanModelStories(t *testing.T) {
	storiesGGUF := testkit.Stories(t, "stories260K-llamacpp.gguf")
	m, err := model.Open(storiesGGUF)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := ModelSizes(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	// norm 64, q/o 64×64, k/v 64×32, ffn_norm 64, gate/up/down 64×172 floats.
	layer := int64(4 * (64 + 2*64*64 + 2*64*32 + 64 + 3*64*172))
	if want := []int64{layer, layer, layer, layer, layer}; !slices.Equal(s.Layers, want) {
		t.Errorf("layers %v, want %v", s.Layers, want)
	}
	if s.Embed != 4*512*64 || s.Head != 4*(512*64+64) {
		t.Errorf("embed %d head %d, want %d %d", s.Embed, s.Head, 4*512*64, 4*(512*64+64))
	}
	st, err := os.Stat(storiesGGUF)
	if err != nil {
		t.Fatal(err)
	}
	total := s.Embed + s.Head
	for _, b := range s.Layers {
		total += b
	}
	if total != st.Size()-14176 {
		t.Errorf("tensor bytes %d, data section %d", total, st.Size()-14176)
	}
	if !slices.Equal(s.LayerTypes, []gguf.Type{gguf.F32, gguf.F32, gguf.F32, gguf.F32, gguf.F32}) {
		t.Errorf("layer types %v", s.LayerTypes)
	}

	p, err := PlanModel(m, Options{Stages: 2, AR: []int{32, 1}, CL: []int{128}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Stages) != 2 || p.Stages[0].Bytes != 3*layer+4*512*64 || p.Stages[0].WeightType != "F32" {
		t.Errorf("stages %+v", p.Stages)
	}
	// head_dim 8 → 8 rotated dims → rope-dim 4; 4 kv heads.
	if got := names(p.Graphs[0].Inputs)[:5]; !slices.Equal(got, []string{"input_ids[1 32]", "attention_mask[1 1 32 128]",
		"position_ids_cos[1 1 32 4]", "position_ids_sin[1 1 32 4]", "past_key_0_in[4 1 8 96]"}) {
		t.Errorf("inputs %v", got)
	}
	if vs := Check(p, CheckEnv{}); len(vs) != 0 {
		t.Errorf("violations: %v", vs)
	}
}

// The HF checkpoint of the same model ties the head to the embedding: the
// last stage still carries its bytes, so sizes match the GGUF's explicit copy.
func TestModelSizesTiedHF(t *testing.T) {
	g, err := model.Open(testkit.Stories(t, "stories260K-llamacpp.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	h, err := model.Open(testkit.Stories(t, "hf"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !h.Config.TiedEmbeddings {
		t.Fatal("HF stories260K should be tied")
	}
	a, err := ModelSizes(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ModelSizes(h, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Layers, b.Layers) || a.Embed != b.Embed || a.Head != b.Head {
		t.Errorf("GGUF %+v, HF %+v", a, b)
	}
	// One stage: in the qmodel the tied head is the embedding itself,
	// counted once; the exported graph declares it twice (the Gather table
	// and the head's MatMul weight).
	p, err := PlanModel(h, Options{Stages: 1, AR: []int{32, 1}, CL: []int{128}})
	if err != nil {
		t.Fatal(err)
	}
	var sum, qsum int64
	for l := range b.Layers {
		sum += b.Layers[l]
		qsum += b.QLayers[l]
	}
	if want := sum + 2*b.Embed + 4*64; p.Stages[0].Bytes != want {
		t.Errorf("single tied stage %d device bytes, want %d", p.Stages[0].Bytes, want)
	}
	if want := qsum + b.QEmbed + 4*64; p.Stages[0].QModelBytes != want {
		t.Errorf("single tied stage %d qmodel bytes, want %d", p.Stages[0].QModelBytes, want)
	}
}
