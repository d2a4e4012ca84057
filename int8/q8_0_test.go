package int8

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/testkit"
)

func TestQuantizeRowQ8_0Golden(t *testing.T) {
	in := testkit.Float32s(t, "ggml-quant-golden/input_f32.bin")
	want := testkit.Read(t, "ggml-quant-golden/q8_0.quant.bin")
	got := make([]byte, len(in)/BlockQ8_0*BlockBytesQ8_0)
	const rowLen = 1024
	rb := rowLen / BlockQ8_0 * BlockBytesQ8_0
	for r := 0; r*rowLen < len(in); r++ {
		QuantizeRowQ8_0(in[r*rowLen:(r+1)*rowLen], got[r*rb:(r+1)*rb])
	}
	if !bytes.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("first difference at byte %d (block %d): got %#02x want %#02x", i, i/BlockBytesQ8_0, got[i], want[i])
			}
		}
	}
}

func TestQuantizeRowPerChannel(t *testing.T) {
	// max|x| = 63.5 → d = 0.5 exactly, so every code is known: x = k/2.
	x := make([]float32, 96)
	for i := range x {
		x[i] = float32(i%128-63) * 0.5
	}
	x[95] = 63.5
	x[94] = -0.24 // rounds to 0
	x[93] = 0.75  // halfway: rounds away from zero to 2
	y := make([]byte, 3*BlockBytesQ8_0)
	if d := QuantizeRowPerChannel(x, y); d != 0.5 {
		t.Fatalf("scale %v, want 0.5", d)
	}
	for b := range 3 {
		blk := y[b*BlockBytesQ8_0:]
		if h := binary.LittleEndian.Uint16(blk); h != 0x3800 {
			t.Errorf("block %d: d = %#04x, want 0x3800 (0.5)", b, h)
		}
		for j := range BlockQ8_0 {
			i := b*BlockQ8_0 + j
			want := int8(i%128 - 63)
			switch i {
			case 95:
				want = 127
			case 94:
				want = 0
			case 93:
				want = 2
			}
			if got := int8(blk[2+j]); got != want {
				t.Errorf("element %d: code %d, want %d", i, got, want)
			}
		}
	}
}

func TestQuantizeRowPerChannelUsesRoundedScale(t *testing.T) {
	// amax/127 is not an fp16 value; codes must divide by the stored d,
	// and values that then exceed 127 steps clamp.
	in := testkit.Float32s(t, "ggml-quant-golden/input_f32.bin")[:1024]
	y := make([]byte, len(in)/BlockQ8_0*BlockBytesQ8_0)
	d := QuantizeRowPerChannel(in, y)
	var amax float32
	for _, v := range in {
		amax = max(amax, abs32(v))
	}
	if want := amax / 127; d == want || math.Abs(float64(d-want)) > float64(want)/1024 {
		t.Fatalf("scale %v: want the fp16 rounding of %v", d, want)
	}
	h := binary.LittleEndian.Uint16(y)
	for b := 0; b < len(in)/BlockQ8_0; b++ {
		blk := y[b*BlockBytesQ8_0:]
		if binary.LittleEndian.Uint16(blk) != h {
			t.Fatalf("block %d has a different scale", b)
		}
		for j := range BlockQ8_0 {
			x, q := float64(in[b*BlockQ8_0+j]), float64(int8(blk[2+j]))
			if q < -127 {
				t.Fatalf("code -128 at %d", b*BlockQ8_0+j)
			}
			if r := math.Abs(x - q*float64(d)); r > float64(d)/2 && math.Abs(q) != 127 {
				t.Errorf("element %d: |x − q·d| = %g > d/2", b*BlockQ8_0+j, r)
			}
		}
	}
}

func TestQuantizeZeroRow(t *testing.T) {
	x := make([]float32, 64)
	for _, f := range []func([]float32, []byte){QuantizeRowQ8_0, func(x []float32, y []byte) { QuantizeRowPerChannel(x, y) }} {
		y := bytes.Repeat([]byte{0xaa}, 68)
		f(x, y)
		if !bytes.Equal(y, make([]byte, 68)) {
			t.Errorf("zero row encodes as %x", y)
		}
	}
}

// TestPerChannelIsQ8_0 decodes per-channel bytes with gguf.Dequantize:
// every value must be exactly code·d with the returned scale.
func TestPerChannelIsQ8_0(t *testing.T) {
	in := testkit.Float32s(t, "ggml-quant-golden/input_f32.bin")
	for r := 0; r < 4; r++ {
		x := in[r*1024 : (r+1)*1024]
		y := make([]byte, len(x)/BlockQ8_0*BlockBytesQ8_0)
		d := QuantizeRowPerChannel(x, y)
		dec := make([]float32, len(x))
		if err := gguf.Dequantize(gguf.Q8_0, y, dec); err != nil {
			t.Fatal(err)
		}
		for i, v := range dec {
			q := float32(int8(y[i/BlockQ8_0*BlockBytesQ8_0+2+i%BlockQ8_0]))
			if v != q*d {
				t.Fatalf("row %d element %d: decodes to %v, want %v·%v", r, i, v, q, d)
			}
			if e := math.Abs(float64(v - x[i])); e > float64(d)/2*(1+1e-6) && math.Abs(float64(q)) != 127 {
				t.Fatalf("row %d element %d: error %g above d/2", r, i, e)
			}
		}
	}
}

func TestPerChannelHugeRow(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1] = 1e10, -5e9
	y := make([]byte, 34)
	if d := QuantizeRowPerChannel(x, y); d != 65504 {
		t.Fatalf("scale %v, want 65504", d)
	}
	if int8(y[2]) != 127 || int8(y[3]) != -127 {
		t.Errorf("codes %d %d, want 127 -127 (saturated)", int8(y[2]), int8(y[3]))
	}
}

func TestQuantizeRowQ8_0AsmMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-40, 6e-8, 65504 * 127, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for iter := range 3000 {
		nb := 1 + iter%9
		x := make([]float32, nb*BlockQ8_0)
		s := math.Ldexp(1, r.IntN(60)-40)
		for i := range x {
			x[i] = float32(r.NormFloat64() * s)
			switch r.IntN(40) {
			case 0:
				x[i] = special[r.IntN(len(special))]
			case 1: // exact halves after scaling: amax 127 gives d = 1
				x[i] = float32(r.IntN(254)-127) + 0.5
			}
		}
		if iter%3 == 0 {
			x[0] = 127
		}
		got, want := make([]byte, nb*BlockBytesQ8_0), make([]byte, nb*BlockBytesQ8_0)
		QuantizeRowQ8_0(x, got)
		quantizeQ8_0Go(x, want)
		if !bytes.Equal(got, want) {
			t.Fatalf("iteration %d: %x\nGo:          %x\ninput %v", iter, got, want, x)
		}
	}
}
