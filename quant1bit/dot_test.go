package quant1bit

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/testkit/blocks"
	"github.com/stretchr/testify/assert"
)

// realistic returns a weight row of Gaussian values encoded by enc, and
// Q8_0 activations shaped like QuantizeRowQ8_0's output: a positive fp16
// scale and codes in [−127, 127] with one ±127 per block.
func realistic(r *rand.Rand, n int, enc func([]float32, []byte), rowBytes int) (w, x []byte) {
	a := make([]float32, n)
	s := math.Ldexp(1, r.IntN(20)-10)
	for i := range a {
		a[i] = float32(r.NormFloat64() * s)
	}
	w = make([]byte, rowBytes)
	enc(a, w)
	x = make([]byte, n/blockQ8_0*blockBytesQ8_0)
	for b := range n / blockQ8_0 {
		blk := x[b*blockBytesQ8_0 : (b+1)*blockBytesQ8_0]
		binary.LittleEndian.PutUint16(blk, half.F32ToF16(float32(math.Abs(r.NormFloat64())+1e-3)/127))
		for j := 2; j < blockBytesQ8_0; j++ {
			blk[j] = byte(int8(max(-127, min(127, math.Round(r.NormFloat64()*40)))))
		}
		blk[2+r.IntN(blockQ8_0)] = byte(int8(127 - 254*r.IntN(2)))
	}
	return w, x
}

func isGo(f, g func([]byte, []byte, int) float32) bool {
	return reflect.ValueOf(f).Pointer() == reflect.ValueOf(g).Pointer()
}

func TestDotAsmMatchesGo(t *testing.T) {
	for _, k := range []struct {
		name      string
		asm, ref  func([]byte, []byte, int) float32
		block     int
		bytes     int
		quantizer func([]float32, []byte)
	}{
		{"Q1_0", dotQ1_0, dotQ1_0Go, BlockQ1_0, BlockBytesQ1_0, QuantizeRowQ1_0},
		{"Q2_0", dotQ2_0, dotQ2_0Go, BlockQ2_0, BlockBytesQ2_0, QuantizeRowQ2_0Ref},
	} {
		t.Run(k.name, func(t *testing.T) {
			if isGo(k.asm, k.ref) {
				t.Skip("no assembly kernel on this CPU")
			}
			r := rand.New(rand.NewPCG(9, uint64(k.block)))
			for iter := range 3000 {
				nb := 1 + iter%19
				if iter%101 == 0 {
					nb = 5632 / k.block
				}
				n := nb * k.block
				var w, x []byte
				if iter%2 == 0 {
					w, x = blocks.Random(r, nb, k.bytes), blocks.Random(r, n/32, 34)
				} else {
					w, x = realistic(r, n, k.quantizer, nb*k.bytes)
				}
				got, want := k.asm(w, x, nb), k.ref(w, x, nb)
				if !blocks.SameFloat(got, want) {
					t.Fatalf("iteration %d, %d blocks: asm %v (%#08x), Go %v (%#08x)", iter, nb, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		})
	}
}

func TestDotChecks(t *testing.T) {
	if DotQ1_0(nil, nil, 0) != 0 || DotQ2_0(nil, nil, 0) != 0 {
		t.Error("empty rows must give 0")
	}
	for name, f := range map[string]func(){
		"Q1_0 n":   func() { DotQ1_0(make([]byte, 18), make([]byte, 136), 64) },
		"Q1_0 w":   func() { DotQ1_0(make([]byte, 17), make([]byte, 136), 128) },
		"Q1_0 x":   func() { DotQ1_0(make([]byte, 18), make([]byte, 135), 128) },
		"Q2_0 n":   func() { DotQ2_0(make([]byte, 18), make([]byte, 68), 32) },
		"Q2_0 x":   func() { DotQ2_0(make([]byte, 18), make([]byte, 67), 64) },
		"Q2_0 n<0": func() { DotQ2_0(nil, nil, -64) },
	} {
		assert.Panics(t, f, name)
	}
}

// TestDotValue compares the kernels with a float64 dot product of the
// rows decoded by gguf.Dequantize.
func TestDotValue(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, k := range []struct {
		typ   gguf.Type
		enc   func([]float32, []byte)
		block int
		dot   func(w, x []byte, n int) float32
	}{
		{gguf.Q1_0, QuantizeRowQ1_0, BlockQ1_0, DotQ1_0},
		{gguf.Q2_0, QuantizeRowQ2_0, BlockQ2_0, DotQ2_0},
	} {
		for _, n := range []int{128, 2048, 5632} {
			w, x := realistic(r, n, k.enc, n/k.block*18)
			want, mag := blocks.Dot(t, k.typ, w, gguf.Q8_0, x, n)
			if got := float64(k.dot(w, x, n)); math.Abs(got-want) > 1e-5*mag {
				t.Errorf("%s n=%d: got %v, want %v", k.typ, n, got, want)
			}
		}
	}
}

func TestDotActsMatchesDot(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	var a Acts
	for _, k := range []struct {
		name      string
		acts      func([]byte, *Acts) float32
		ref       func([]byte, []byte, int) float32
		block     int
		quantizer func([]float32, []byte)
	}{
		{"Q1_0", DotQ1_0Acts, dotQ1_0Go, BlockQ1_0, QuantizeRowQ1_0},
		{"Q2_0", DotQ2_0Acts, dotQ2_0Go, BlockQ2_0, QuantizeRowQ2_0Ref},
	} {
		for iter := range 2000 {
			nb := 1 + iter%13
			n := nb * k.block
			var w, x []byte
			if iter%2 == 0 {
				w, x = blocks.Random(r, nb, 18), blocks.Random(r, n/32, 34)
			} else {
				w, x = realistic(r, n, k.quantizer, nb*18)
			}
			a.Set(x, n)
			if got, want := k.acts(w, &a), k.ref(w, x, nb); !blocks.SameFloat(got, want) {
				t.Fatalf("%s iteration %d: Acts %v (%#08x), Go %v (%#08x)", k.name, iter, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
		a.Set(nil, 0)
		if k.acts(nil, &a) != 0 {
			t.Errorf("%s: empty row must give 0", k.name)
		}
	}
}
