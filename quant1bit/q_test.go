package quant1bit

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/testkit"
	"github.com/stretchr/testify/assert"
)

func TestGoldenBytes(t *testing.T) {
	in := testkit.Float32s(t, "ggml-quant-golden/input_f32.bin")
	const rowLen = 1024
	for _, tc := range []struct {
		file     string
		rowBytes int
		quantize func([]float32, []byte)
	}{
		{"q1_0.quant.bin", rowLen / BlockQ1_0 * BlockBytesQ1_0, QuantizeRowQ1_0},
		{"q2_0.quant.bin", rowLen / BlockQ2_0 * BlockBytesQ2_0, QuantizeRowQ2_0Ref},
	} {
		want := testkit.Read(t, "ggml-quant-golden/"+tc.file)
		got := make([]byte, 0, len(want))
		for r := 0; r*rowLen < len(in); r++ {
			row := make([]byte, tc.rowBytes)
			tc.quantize(in[r*rowLen:(r+1)*rowLen], row)
			got = append(got, row...)
		}
		if !bytes.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("%s: first difference at byte %d (block %d): got %#02x want %#02x", tc.file, i, i/18, got[i], want[i])
					break
				}
			}
		}
	}
}

func TestQuantizeRowQ1_0Edges(t *testing.T) {
	x := make([]float32, BlockQ1_0)
	y := make([]byte, BlockBytesQ1_0)
	x[3] = float32(math.Copysign(0, -1)) // −0 counts as ≥ 0, like ggml
	x[5] = -1
	x[127] = -0.5
	x[8] = 0.25
	QuantizeRowQ1_0(x, y)
	// Σ|x|/128 = 1.75/128, = 1.75·2⁻⁷, exactly representable in fp16 (0x2300).
	if d := binary.LittleEndian.Uint16(y); d != 0x2300 {
		t.Errorf("d = %#04x, want 0x2300", d)
	}
	want := bytes.Repeat([]byte{0xff}, 16)
	want[0] = 0xff &^ (1 << 5)
	want[15] = 0xff &^ (1 << 7)
	if !bytes.Equal(y[2:], want) {
		t.Errorf("bits = %x, want %x", y[2:], want)
	}
}

func TestQuantizeRowPanicsOnBadLength(t *testing.T) {
	for name, f := range map[string]func(){
		"Q1_0 row":  func() { QuantizeRowQ1_0(make([]float32, 64), make([]byte, 18)) },
		"Q1_0 dst":  func() { QuantizeRowQ1_0(make([]float32, 128), make([]byte, 17)) },
		"Q2_0 row":  func() { QuantizeRowQ2_0(make([]float32, 32), make([]byte, 18)) },
		"Q2_0R dst": func() { QuantizeRowQ2_0Ref(make([]float32, 64), make([]byte, 17)) },
	} {
		assert.Panics(t, f, name)
	}
}

// storedQ2Error decodes an encoded block with gguf.Dequantize, checks
// that every element got its best code for the stored scale, and returns
// the squared error.
func storedQ2Error(t *testing.T, x []float32, y []byte) float64 {
	t.Helper()
	dec := make([]float32, len(x))
	if err := gguf.Dequantize(gguf.Q2_0, y, dec); err != nil {
		t.Fatal(err)
	}
	h := binary.LittleEndian.Uint16(y)
	d := q2Candidate{h: h &^ 0x8000, neg: h&0x8000 != 0}.d()
	var e float64
	for j, v := range x {
		r := float64(v) - float64(dec[j])
		for c := -1.0; c <= 2; c++ {
			if o := float64(v) - c*d; o*o < r*r {
				t.Fatalf("element %d: decodes to %v, but %v·%v is closer to %v", j, dec[j], c, d, v)
			}
		}
		e += r * r
	}
	return e
}

func randomBlock(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	switch r.IntN(4) {
	case 0: // Gaussian
		for i := range x {
			x[i] = float32(r.NormFloat64() * 0.02)
		}
	case 1: // heavy tail: one large negative outlier
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		x[r.IntN(n)] = -12
	case 2: // few distinct values, many ties and zeros
		for i := range x {
			x[i] = float32(r.IntN(7)-3) * 0.125
		}
	default: // uniform, wide dynamic range
		s := math.Ldexp(1, r.IntN(40)-25)
		for i := range x {
			x[i] = float32((r.Float64()*2 - 1) * s)
		}
	}
	return x
}

func TestQuantizeRowQ2_0IsOptimal(t *testing.T) {
	in := testkit.Float32s(t, "ggml-quant-golden/input_f32.bin")
	r := rand.New(rand.NewPCG(1, 2))
	blocks := [][]float32{in[:64], in[1024 : 1024+64], in[4096-64:]}
	for range 5 {
		blocks = append(blocks, randomBlock(r, BlockQ2_0))
	}
	y := make([]byte, BlockBytesQ2_0)
	for i, x := range blocks {
		QuantizeRowQ2_0(x, y)
		got, want := storedQ2Error(t, x, y), exhaustiveQ2(x)
		if got > want*(1+1e-12) {
			t.Errorf("block %d: squared error %g, exhaustive search finds %g", i, got, want)
		}
	}
}

func TestQuantizeRowQ2_0NegativeScale(t *testing.T) {
	// One dominant negative value: a negative d gives it the −2|d| level.
	x := make([]float32, BlockQ2_0)
	for i := range x {
		x[i] = float32(i%3-1) * 0.5 // −0.5, 0, 0.5
	}
	x[7] = -1
	y := make([]byte, BlockBytesQ2_0)
	QuantizeRowQ2_0(x, y)
	if h := binary.LittleEndian.Uint16(y); h != 0xb800 { // −0.5
		t.Errorf("d = %#04x, want 0xb800 (−0.5)", h)
	}
	if e := storedQ2Error(t, x, y); e != 0 {
		t.Errorf("squared error %g, want 0 (every value is on the grid)", e)
	}
}

func TestQuantizeRowQ2_0Special(t *testing.T) {
	y := make([]byte, BlockBytesQ2_0)
	ref := make([]byte, BlockBytesQ2_0)
	zero := make([]float32, BlockQ2_0)
	QuantizeRowQ2_0(zero, y)
	if want := append([]byte{0, 0}, bytes.Repeat([]byte{0x55}, 16)...); !bytes.Equal(y, want) {
		t.Errorf("zero block: %x, want %x", y, want)
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		x := make([]float32, BlockQ2_0)
		x[10] = 1
		x[11] = bad
		QuantizeRowQ2_0(x, y)
		QuantizeRowQ2_0Ref(x, ref)
		if !bytes.Equal(y, ref) {
			t.Errorf("block with %v: %x, want the reference encoding %x", bad, y, ref)
		}
	}
	// Beyond the fp16 range the reference d overflows; the search still
	// finds a finite scale.
	x := make([]float32, BlockQ2_0)
	x[0], x[1] = 1e6, 3e4
	QuantizeRowQ2_0(x, y)
	if h := binary.LittleEndian.Uint16(y); h&0x7fff >= f16Inf {
		t.Errorf("huge block: d = %#04x is not finite", h)
	}
}

func TestQuantizeRowQ2_0Deterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 0, 64*BlockQ2_0)
	for range 64 {
		x = append(x, randomBlock(r, BlockQ2_0)...)
	}
	a := make([]byte, len(x)/BlockQ2_0*BlockBytesQ2_0)
	b := make([]byte, len(a))
	QuantizeRowQ2_0(x, a)
	// Encoding blocks one at a time must give the same bytes.
	for i := 0; i < len(x)/BlockQ2_0; i++ {
		QuantizeRowQ2_0(x[i*BlockQ2_0:(i+1)*BlockQ2_0], b[i*BlockBytesQ2_0:])
	}
	if !bytes.Equal(a, b) {
		t.Error("same blocks, different bytes")
	}
}

// rowError is Σ(x − decoded)² for an encoded Q2_0 row, decoded by
// gguf.Dequantize.
func rowError(t *testing.T, x []float32, y []byte) float64 {
	t.Helper()
	dec := make([]float32, len(x))
	if err := gguf.Dequantize(gguf.Q2_0, y, dec); err != nil {
		t.Fatal(err)
	}
	var e float64
	for i, v := range x {
		r := float64(v) - float64(dec[i])
		e += r * r
	}
	return e
}

// rowRMSE is the relative RMS error of an encoded Q2_0 row.
func rowRMSE(t *testing.T, x []float32, y []byte) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(rowError(t, x, y) / s)
}

func TestQuantizeRowQ2_0BeatsReference(t *testing.T) {
	in := testkit.Float32s(t, "ggml-quant-golden/input_f32.bin")
	ref := make([]byte, len(in)/BlockQ2_0*BlockBytesQ2_0)
	got := make([]byte, len(ref))
	QuantizeRowQ2_0Ref(in, ref)
	QuantizeRowQ2_0(in, got)
	// golden_summary.txt: rel_rmse=0.70644 for ggml's reference encoder.
	refRMSE, gotRMSE := rowRMSE(t, in, ref), rowRMSE(t, in, got)
	if math.Abs(refRMSE-0.70644) > 5e-6 {
		t.Errorf("reference rel-RMSE %.5f, golden summary says 0.70644", refRMSE)
	}
	t.Logf("golden rows: rel-RMSE reference %.4f, search %.4f", refRMSE, gotRMSE)
	if gotRMSE >= refRMSE*0.75 {
		t.Errorf("search rel-RMSE %.4f is not clearly below the reference's %.4f", gotRMSE, refRMSE)
	}

	r := rand.New(rand.NewPCG(21, 22))
	for row := range 200 {
		x := make([]float32, 0, 4*BlockQ2_0)
		for range 4 {
			x = append(x, randomBlock(r, BlockQ2_0)...)
		}
		ref, got := make([]byte, 4*BlockBytesQ2_0), make([]byte, 4*BlockBytesQ2_0)
		QuantizeRowQ2_0Ref(x, ref)
		QuantizeRowQ2_0(x, got)
		if a, b := rowRMSE(t, x, got), rowRMSE(t, x, ref); a > b*(1+1e-12) {
			t.Errorf("random row %d: rel-RMSE %g above the reference's %g", row, a, b)
		}
	}
}

func TestF16Bracket(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	vals := []float64{0, 0x1p-24, 0x1p-25, 0x1p-14, 0x1p-14 * (1 - 0x1p-30), 1, 1 + 0x1p-11, 65504, 65505, 1e9}
	for range 2000 {
		vals = append(vals, math.Ldexp(r.Float64(), r.IntN(44)-26))
	}
	for _, v := range vals {
		lo, hi := f16Bracket(v)
		// The exhaustive answer: the last fp16 value ≤ v and the first ≥ v.
		wlo, whi := uint16(0), uint16(f16Inf)
		for h := uint16(0); h < f16Inf; h++ {
			f := float64(half.F16ToF32(h))
			if f <= v {
				wlo = h
			}
			if f >= v {
				whi = h
				break
			}
		}
		if lo != wlo || (hi != whi && !(whi == f16Inf && hi == f16Inf)) {
			if !(v == 65504 && lo == 0x7bff) {
				t.Fatalf("f16Bracket(%g) = %#04x, %#04x; want %#04x, %#04x", v, lo, hi, wlo, whi)
			}
		}
	}
}

// TestQ1SignsMatchGo compares the chosen sign packer with the Go loop on
// values that include ±0, ±Inf and NaNs of both signs.
func TestQ1SignsMatchGo(t *testing.T) {
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0xffc00001), 1e-45, -1e-45}
	for _, nb := range []int{1, 2, 3, 7} {
		x := make([]float32, nb*BlockQ1_0)
		for i := range x {
			if i%5 == 0 {
				x[i] = specials[(i/5)%len(specials)]
			} else {
				x[i] = float32(math.Sin(float64(i)*1.7)) * 3
			}
		}
		got := make([]byte, nb*BlockBytesQ1_0)
		want := make([]byte, nb*BlockBytesQ1_0)
		q1Signs(x, got, nb)
		q1SignsGo(x, want, nb)
		if string(got) != string(want) {
			t.Fatalf("nb=%d: sign bytes differ\n got %x\nwant %x", nb, got, want)
		}
	}
}

// TestQ1Sums8MatchesGo compares the chosen 8-block sum kernel with the Go
// loop bit for bit, NaN and ±Inf included.
func TestQ1Sums8MatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	var x [8 * BlockQ1_0]float32
	for it := range 200 {
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(20)-10))
		}
		if it%3 == 0 {
			x[r.IntN(len(x))] = float32(math.NaN())
			x[r.IntN(len(x))] = float32(math.Inf(1 - 2*r.IntN(2)))
			x[r.IntN(len(x))] = math.Float32frombits(0x7fa00001)
		}
		var got, want [8]float32
		q1Sums8(&x, &got)
		q1Sums8Go(&x, &want)
		for k := range got {
			if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
				t.Fatalf("iteration %d block %d: %#08x, Go loop %#08x", it, k, math.Float32bits(got[k]), math.Float32bits(want[k]))
			}
		}
	}
}
