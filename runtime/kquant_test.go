package runtime

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// TestRoundQ8K checks the Q8_K activation rounding on hand-made blocks:
// scale from the signed element of largest magnitude, ties to even.
func TestRoundQ8K(t *testing.T) {
	x := make([]float32, 256)
	// m = −127 → iscale = 1, d = 1: values round to integers, ties to even.
	x[0], x[1], x[2], x[3], x[4] = 2.5, 3.5, -2.5, 0.49, -127
	x[5] = 127 // same magnitude as m but later: m stays −127
	y := make([]float32, 256)
	roundQ8K(y, x)
	want := []float32{2, 4, -2, 0, -127, 127}
	for i, w := range want {
		if y[i] != w {
			t.Errorf("x[%d] = %v → %v, want %v", i, x[i], y[i], w)
		}
	}
	// m = 2 (positive): iscale = −63.5, d = 1/−63.5; 2 → −127 → 2.
	clear(x)
	x[0], x[1] = 2, 1
	roundQ8K(y, x)
	d := 1 / float32(-63.5)
	if y[0] != float32(-127)*d || y[1] != float32(-64)*d { // 1·−63.5 = −63.5 → −64 (even)
		t.Errorf("positive max: got %v %v", y[0], y[1])
	}
	// An all-zero block stays zero; blocks are independent.
	x2 := make([]float32, 512)
	x2[300] = 1
	y2 := make([]float32, 512)
	for i := range y2 {
		y2[i] = 9
	}
	roundQ8K(y2, x2)
	for i, v := range y2 {
		if (i == 300 && v != 1) || (i != 300 && v != 0) {
			t.Fatalf("y[%d] = %v", i, v)
		}
	}
}

// randQ4K returns random but valid Q4_K rows (scales and codes random,
// d and dmin sized so values spread about ±1.5·std).
func randQ4K(rng *rand.Rand, rows, cols int, std float64) []byte {
	out := make([]byte, rows*cols/256*144)
	for i := 0; i < len(out); i += 144 {
		binary.LittleEndian.PutUint16(out[i:], half.F32ToF16(float32(3*std/(63*15))))
		binary.LittleEndian.PutUint16(out[i+2:], half.F32ToF16(float32(1.5*std/63)))
		for j := 4; j < 144; j++ {
			out[i+j] = byte(rng.Uint32())
		}
	}
	return out
}

// kquantModel is a synthetic model whose matrices with rows of a multiple
// of 256 are random Q4_K and the rest F32.
func kquantModel(t *testing.T, arch model.Arch) *model.Model {
	cfg := synth.Config(arch, true)
	m0, err := synth.Model(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 9))
	var ts []*model.Tensor
	for _, tt := range m0.Tensors {
		data, err := tt.Data()
		if err != nil {
			t.Fatal(err)
		}
		typ := tt.Type
		if len(tt.Dims) == 2 && tt.Dims[0]%256 == 0 && tt.Name != "token_embd.weight" {
			typ = gguf.Q4_K
			data = randQ4K(rng, int(tt.Dims[1]), int(tt.Dims[0]), 1/math.Sqrt(float64(tt.Dims[0])))
		}
		ts = append(ts, model.NewTensor(tt.Name, tt.Dims, typ, data))
	}
	m, err := model.New(cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKQuantWeights: K-quant matrices (decoded row by row, activations
// rounded to Q8_K) keep batched == per-token, and their products equal
// float64 dot products of the decoded rows with the Q8_K-rounded input.
func TestKQuantWeights(t *testing.T) {
	for _, arch := range []model.Arch{model.Llama, model.Qwen35} {
		t.Run(string(arch), func(t *testing.T) {
			m := kquantModel(t, arch)
			toks := randomTokens(7, m.Config.VocabSize, 6)
			ref := newEngine(t, m, Options{Threads: 1, Batch: 1}).NewState()
			got, err := newEngine(t, m, Options{Threads: 2, Batch: 4}).NewState().ForwardAll(toks)
			if err != nil {
				t.Fatal(err)
			}
			for i, tok := range toks {
				want, err := ref.Forward([]int32{tok})
				if err != nil {
					t.Fatal(err)
				}
				if err := sameBits(got[i], want); err != nil {
					t.Fatalf("token %d: %v", i, err)
				}
			}
		})
	}
	// One product in detail.
	m := kquantModel(t, model.Llama)
	e := newEngine(t, m, Options{})
	w := e.layers[0].wq
	if w.typ != gguf.Q4_K {
		t.Fatalf("attn_q is %v", w.typ)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, 2*w.cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	var a acts
	a.reset(x, 2, w.cols)
	out := make([]float32, 2*w.rows)
	if err := e.matmul(w, &a, out); err != nil {
		t.Fatal(err)
	}
	xr := make([]float32, len(x))
	roundQ8K(xr, x)
	row := make([]float32, w.cols)
	for r := 0; r < w.rows; r++ {
		if err := gguf.Dequantize(gguf.Q4_K, w.data[r*w.rowBytes:(r+1)*w.rowBytes], row); err != nil {
			t.Fatal(err)
		}
		for tk := 0; tk < 2; tk++ {
			var s float64
			for j, v := range row {
				s += float64(v) * float64(xr[tk*w.cols+j])
			}
			if d := math.Abs(float64(out[tk*w.rows+r]) - s); d > 1e-4*(1+math.Abs(s)) {
				t.Fatalf("row %d token %d: %v, want %v", r, tk, out[tk*w.rows+r], s)
			}
		}
	}
}
