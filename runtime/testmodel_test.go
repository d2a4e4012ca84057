package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

// tinyModel is synthModel(cfg, seed) with its 2-D matrices but
// the DeltaNet conv kernel stored in typ, everything else F32. Q1_0 and
// Q2_0 need synth.Config(arch, true)'s widths.
func tinyModel(t testing.TB, cfg model.Config, typ gguf.Type, seed uint64) *model.Model {
	t.Helper()
	src := synthModel(t, cfg, seed)
	if typ == gguf.F32 {
		return src
	}
	var ts []*model.Tensor
	for _, tt := range src.Tensors {
		if len(tt.Dims) == 2 && !strings.HasSuffix(tt.Name, "ssm_conv1d.weight") {
			v, err := tt.Float32()
			require.NoError(t, err)
			tt = model.NewTensor(tt.Name, tt.Dims, typ, encode(t, typ, v, int(tt.Dims[0])))
		}
		ts = append(ts, tt)
	}
	m, err := model.New(cfg, ts)
	require.NoError(t, err)
	return m
}

// encode stores rows of cols values in typ, as the quantizer does.
func encode(t testing.TB, typ gguf.Type, vals []float32, cols int) []byte {
	rb, err := typ.RowBytes(int64(cols))
	require.NoError(t, err)
	out := make([]byte, int(rb)*(len(vals)/cols))
	for r := range len(vals) / cols {
		quantize.EncodeRow(quantize.Kind{Type: typ}, vals[r*cols:(r+1)*cols], out[r*int(rb):(r+1)*int(rb)])
	}
	return out
}

func randomTokens(n, vocab int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 11))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

func newEngine(t testing.TB, m *model.Model, opt Options) *Engine {
	t.Helper()
	e, err := New(m, opt)
	require.NoError(t, err)
	return e
}

func sameBits(a, b []float32) error {
	if len(a) != len(b) {
		return fmt.Errorf("lengths %d and %d", len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return fmt.Errorf("element %d: %v vs %v", i, a[i], b[i])
		}
	}
	return nil
}
