package golden

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
)

// tinyConfig is a small model of arch whose widths suit Q1_0 (multiples
// of 128), with untied head so that random weights do not merely echo
// the last token.
func tinyConfig(arch model.Arch, ctx int) model.Config {
	c := model.Config{
		Arch: arch, VocabSize: 128, Hidden: 128, Layers: 2, FFN: 256,
		Heads: 4, KVHeads: 2, HeadDim: 32, ContextLength: ctx,
		RMSEps: 1e-6, RopeTheta: 10000, RopeDim: 32, RopeNeox: true,
		BOS: 1, EOS: 2,
	}
	c.LayerKinds = make([]model.LayerKind, c.Layers)
	f := arch.Features()
	c.RopeNeox, c.QKVBias, c.QKNorm = !f.NormRope, f.QKVBias, f.QKNorm
	if f.NormRope {
		c.RMSEps = 1e-5 // as llama's
	}
	return c
}

// randomModel builds an F32 model with random weights.
func randomModel(t testing.TB, cfg model.Config, seed uint64) *model.Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var ts []*model.Tensor
	for _, s := range model.ExpectedTensors(cfg) {
		if s.Optional {
			continue
		}
		n := 1
		for _, d := range s.Dims {
			n *= int(d)
		}
		sc, off := float32(1/math.Sqrt(float64(s.Dims[0]))), float32(0)
		switch {
		case strings.HasSuffix(s.Name, "norm.weight"):
			sc, off = 0.1, 1
		case strings.HasSuffix(s.Name, ".bias"):
			sc = 0.5
		case s.Name == "token_embd.weight":
			sc = 1
		}
		b := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(off+sc*float32(rng.NormFloat64())))
		}
		ts = append(ts, model.NewTensor(s.Name, s.Dims, gguf.F32, b))
	}
	m, err := model.New(cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func engine(t testing.TB, m *model.Model) *runtime.Engine {
	t.Helper()
	e, err := runtime.New(m, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// rewrite writes m's tensors and metadata as a GGUF file with the tensor
// name replaced by data (F32), and opens it: an artifact corrupted after
// quantization, still claiming the same source fingerprint.
func rewrite(t testing.TB, m *model.Model, name string, data []float32) *model.Model {
	t.Helper()
	w := &gguf.Writer{Metadata: m.Metadata}
	found := false
	for _, tt := range m.Tensors {
		wt := gguf.WriterTensor{Name: tt.Name, Dims: tt.Dims, Type: tt.Type, Data: tt}
		if tt.Name == name {
			found = true
			b := make([]byte, 4*len(data))
			for i, v := range data {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			wt.Type, wt.Data = gguf.F32, gguf.Bytes(b)
		}
		w.Tensors = append(w.Tensors, wt)
	}
	if !found {
		t.Fatalf("no tensor %s", name)
	}
	path := filepath.Join(t.TempDir(), "corrupt.gguf")
	if err := gguf.WriteFile(path, w); err != nil {
		t.Fatal(err)
	}
	c, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func prompts(n, vocab int, seed uint64) []Prompt {
	rng := rand.New(rand.NewPCG(seed, 2))
	var ps []Prompt
	for i := 0; i < n; i++ {
		ids := make([]int32, 4+i)
		for j := range ids {
			ids[j] = int32(rng.IntN(vocab))
		}
		ps = append(ps, Prompt{IDs: ids})
	}
	return ps
}
