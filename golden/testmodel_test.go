package golden

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/synth"
)

// tinyConfig is synth's small model of arch with Q1_0 widths, context
// ctx and an untied head, so that its random weights do not merely echo
// the last token.
func tinyConfig(arch model.Arch, ctx int) model.Config {
	c := synth.Config(arch, true)
	c.ContextLength, c.TiedEmbeddings = ctx, false
	return c
}

// randomModel is synth's model of cfg and seed (F32).
func randomModel(t testing.TB, cfg model.Config, seed uint64) *model.Model {
	t.Helper()
	m, err := synth.Model(cfg, seed)
	require.NoError(t, err)
	return m
}

func engine(t testing.TB, m *model.Model) *runtime.Engine {
	t.Helper()
	e, err := runtime.New(m, runtime.Options{})
	require.NoError(t, err)
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
	require.NoError(t, gguf.WriteFile(path, w))
	c, err := model.Open(path)
	require.NoError(t, err)
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
