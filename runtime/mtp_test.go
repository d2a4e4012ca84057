package runtime

import (
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// writeMTPModel writes tm as a qwen35 GGUF with one MTP block after the
// main stack (llama.cpp's layout: blk.L.nextn.* and an attention block
// blk.L.*), made by mtp from the block's expected tensors, and opens it.
func writeMTPModel(t *testing.T, tm *model.Model, mtp func(name string, dims []int64) []float32) *model.Model {
	c := tm.Config
	H, L := int64(c.Hidden), c.Layers
	md := tm.GGUFMetadata()
	md.Set("qwen35.block_count", uint32(L+1))
	md.Set("qwen35.nextn_predict_layers", uint32(1))
	w := &gguf.Writer{Metadata: md}
	for _, tt := range tm.Tensors {
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: tt.Name, Dims: tt.Dims, Type: tt.Type, Data: tt})
	}
	bc := c
	bc.Layers, bc.LayerKinds, bc.TiedEmbeddings = 1, []model.LayerKind{model.Attention}, false
	add := func(name string, dims []int64) {
		v := mtp(name, dims)
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: name, Dims: dims, Type: gguf.F32, Data: gguf.Bytes(encode(t, gguf.F32, v, int(dims[0])))})
	}
	p := "blk." + itoa(L) + "."
	for _, s := range model.ExpectedTensors(bc) {
		if strings.HasPrefix(s.Name, "blk.0.") {
			add(p+strings.TrimPrefix(s.Name, "blk.0."), s.Dims)
		}
	}
	add(p+"nextn.eh_proj.weight", []int64{2 * H, H})
	add(p+"nextn.enorm.weight", []int64{H})
	add(p+"nextn.hnorm.weight", []int64{H})
	add(p+"nextn.shared_head_norm.weight", []int64{H})
	path := filepath.Join(t.TempDir(), "mtp.gguf")
	if err := gguf.WriteFile(path, w); err != nil {
		t.Fatal(err)
	}
	m, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if m.Config.Layers != L {
		t.Fatalf("opened with %d layers, want %d", m.Config.Layers, L)
	}
	return m
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestMTP: a qwen35 MTP head read from the GGUF drafts exactly (random
// weights: output equals greedy, K = 1…4), and a head constructed to
// reproduce a bigram target (hnorm zero, fc selecting the normed
// embedding, the block adding nothing, the target's norm and head) has
// its proposals accepted.
func TestMTP(t *testing.T) {
	cfg := synth.Config(model.Qwen35, false)
	cfg.ContextLength = 160
	cfg.TiedEmbeddings = false
	rng := rand.New(rand.NewPCG(4, 4))
	random := func(name string, dims []int64) []float32 {
		n := int(dims[0])
		if len(dims) == 2 {
			n *= int(dims[1])
		}
		v := make([]float32, n)
		for i := range v {
			if strings.HasSuffix(name, "norm.weight") {
				v[i] = 1 + 0.1*float32(rng.NormFloat64())
			} else {
				v[i] = float32(rng.NormFloat64()) / float32(dims[0]) * 8
			}
		}
		return v
	}
	for _, tc := range []struct {
		name    string
		target  func() *model.Model
		mtp     func(tm *model.Model) func(string, []int64) []float32
		minRate float64
	}{
		{"random", func() *model.Model { return tinyModel(t, cfg, gguf.Q8_0, 40) },
			func(*model.Model) func(string, []int64) []float32 { return random }, 0},
		{"distilled", func() *model.Model { return synthBigram(t, cfg, 50) },
			func(tm *model.Model) func(string, []int64) []float32 {
				outNorm, _ := tm.Tensor("output_norm.weight").Float32()
				return func(name string, dims []int64) []float32 {
					v := random(name, dims)
					switch {
					case strings.HasSuffix(name, "nextn.eh_proj.weight"): // x = enorm(e): [I | 0]
						clear(v)
						for r := 0; r < int(dims[1]); r++ {
							v[r*int(dims[0])+r] = 1
						}
					case strings.HasSuffix(name, "nextn.enorm.weight"):
						for i := range v {
							v[i] = 1
						}
					case strings.HasSuffix(name, "nextn.hnorm.weight"), strings.HasSuffix(name, "attn_output.weight"), strings.HasSuffix(name, "ffn_down.weight"):
						clear(v)
					case strings.HasSuffix(name, "shared_head_norm.weight"):
						copy(v, outNorm)
					}
					return v
				}
			}, 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.target()
			m := writeMTPModel(t, src, tc.mtp(src))
			target := newEngine(t, m, Options{})
			h, err := LoadMTP(target, m)
			if err != nil {
				t.Fatal(err)
			}
			all := checkSpec(t, target, specPrompts(cfg.VocabSize)[:3], 96, func() Drafter { return h.Drafter() })
			logStats(t, "mtp "+tc.name, all)
			for k, st := range all {
				if st.AcceptanceRate() < tc.minRate {
					t.Errorf("K=%d: acceptance rate %.2f, want ≥ %.2f", k+1, st.AcceptanceRate(), tc.minRate)
				}
			}
		})
	}
	// A model without an MTP block is refused by name.
	plain := tinyModel(t, cfg, gguf.F32, 1)
	if _, err := LoadMTP(newEngine(t, plain, Options{}), plain); err == nil {
		t.Errorf("a model without MTP block was accepted")
	}
}
