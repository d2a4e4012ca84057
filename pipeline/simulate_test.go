package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// hybrid is the synthetic qwen35 hybrid (three Gated DeltaNet layers and
// one gated-attention layer, hidden 256) quantized with the int8 recipe,
// planned in two stages, with the synthetic vocabulary's tokenizer.
type hybrid struct {
	qm  *model.Model
	p   *shard.Plan
	tok *tokenizer.Tokenizer
}

func newHybrid(t *testing.T) *hybrid {
	t.Helper()
	cfg := synth.Config(model.Qwen35, true)
	src, err := synth.Model(cfg, 11)
	require.NoError(t, err)
	md, err := synth.VocabMetadata(cfg.VocabSize)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "qmodel.gguf")
	_, err = quantize.Run(context.Background(), src, out, quantize.Options{Recipe: quantize.Recipes["int8"], Workers: 1, Metadata: md})
	require.NoError(t, err)
	qm, err := model.Open(out)
	require.NoError(t, err)
	t.Cleanup(func() { qm.Close() })
	p, err := shard.PlanModel(qm, shard.Options{Stages: 2, AR: []int{4, 1}, CL: []int{96}})
	require.NoError(t, err)
	v, err := tokenizer.FromGGUF(qm.Metadata)
	require.NoError(t, err)
	tok, err := tokenizer.New(v)
	require.NoError(t, err)
	return &hybrid{qm, p, tok}
}

// text writes lines of words the synthetic vocabulary holds ("a" … "zz"),
// drawn with seed, into a file.
func text(t *testing.T, seed uint64, lines, words int) string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for range lines {
		for w := range words {
			if w > 0 {
				b.WriteByte(' ')
			}
			k := r.IntN(26 * 27)
			if k < 26 {
				b.WriteByte(byte('a' + k))
			} else {
				b.WriteByte(byte('a' + k/26 - 1))
				b.WriteByte(byte('a' + k%26))
			}
		}
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("text%d.txt", seed))
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

// export writes the plan's graphs with ranges and returns their encodings.
func (h *hybrid) export(t *testing.T, ranges map[string]onnx.Range) map[string]*onnx.Encodings {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "onnx")
	_, err := onnx.Export(h.qm, h.p, dir, onnx.ExportOptions{Options: onnx.Options{Ranges: ranges}}, nil)
	require.NoError(t, err)
	encs, err := ReadGraphEncodings(dir, h.p)
	require.NoError(t, err)
	return encs
}

// prompts are the first lines of a text file, tokenized.
func (h *hybrid) prompts(t *testing.T, path string, n int) []golden.Prompt {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var ps []golden.Prompt
	for _, line := range strings.SplitN(string(b), "\n", n+1)[:n] {
		ps = append(ps, golden.Prompt{Name: line, IDs: h.tok.Encode(line, true)})
	}
	return ps
}

// TestSimulateCalibratedEncodings: encodings calibrated from one text keep
// the simulated decode's teacher-forced top-1 agreement with the float run
// at 0.95 or more on another text; the same ranges with the KV range
// narrowed ten times are reported as a large loss.
func TestSimulateCalibratedEncodings(t *testing.T) {
	h := newHybrid(t)
	ctx := context.Background()
	cal, err := Calibrate(ctx, h.qm, h.p, CalibOptions{
		Text: text(t, 1, 24, 12), Tokenizer: h.tok, Samples: 16, Len: 24,
	})
	require.NoError(t, err)
	for _, g := range []string{"hidden_states_0", "logits", "past_key_3", "past_value_3", "past_conv_0", "past_ssm_0"} {
		assert.Contains(t, cal.Ranges, g)
	}
	assert.Equal(t, 16, cal.Settings.Samples)

	other := h.prompts(t, text(t, 2, 8, 8), 8)
	so := SimOptions{Prompts: other, Tokens: 32}
	good, err := SimulateEncodings(ctx, h.qm, h.p, h.export(t, cal.Ranges), so)
	require.NoError(t, err)
	t.Logf("calibrated: top-1 %.4f, cosine %.6f, exact %d/%d", good.Summary.Top1, *good.Summary.Cosine, good.Summary.Matched, good.Summary.Tokens)
	assert.GreaterOrEqual(t, good.Summary.Top1, 0.95)
	assert.True(t, good.Pass, "failures: %v", good.Failures)

	narrow := map[string]onnx.Range{}
	for k, r := range cal.Ranges {
		if strings.HasPrefix(k, "past_key_") || strings.HasPrefix(k, "past_value_") {
			r = onnx.Range{Min: r.Min / 10, Max: r.Max / 10}
		}
		narrow[k] = r
	}
	bad, err := SimulateEncodings(ctx, h.qm, h.p, h.export(t, narrow), so)
	require.NoError(t, err)
	t.Logf("KV range ×0.1: top-1 %.4f, cosine %.6f, exact %d/%d", bad.Summary.Top1, *bad.Summary.Cosine, bad.Summary.Matched, bad.Summary.Tokens)
	assert.False(t, bad.Pass, "a KV range ten times too narrow passed")
	assert.Less(t, bad.Summary.Top1, good.Summary.Top1)
	assert.Less(t, *bad.Summary.Cosine, *good.Summary.Cosine)
	assert.NotEmpty(t, bad.Failures)
}

// TestSimulateWeightsOnly: with the parameter encodings only (proven to be
// the qmodel's) the simulation is the float run: every token and the
// cosine exactly 1. Parameter encodings of other weights are refused.
func TestSimulateWeightsOnly(t *testing.T) {
	h := newHybrid(t)
	ctx := context.Background()
	encs := h.export(t, nil)
	for _, e := range encs {
		e.ActivationEncodings = nil
	}
	r, err := SimulateEncodings(ctx, h.qm, h.p, encs, SimOptions{Tokens: 8})
	require.NoError(t, err)
	assert.Equal(t, 1.0, r.Summary.Top1)
	assert.Equal(t, 1.0, *r.Summary.Cosine)
	assert.Equal(t, r.Summary.Tokens, r.Summary.Matched)
	assert.Contains(t, r.Decoder, "0 activation tensors")
	assert.True(t, r.Pass)

	g := h.p.Graphs[0].Name
	pe := &encs[g].ParamEncodings[0]
	pe.Scale = append(onnx.Float32s(nil), pe.Scale...)
	pe.Scale[0] *= 2
	_, err = SimulateEncodings(ctx, h.qm, h.p, encs, SimOptions{Tokens: 8})
	require.Error(t, err)
	assert.Contains(t, err.Error(), pe.Name)
	assert.Contains(t, err.Error(), "scales or offsets differ")
}
