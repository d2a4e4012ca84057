package gguf

import (
	"math"
	"testing"

	"github.com/qnnprep/qnnprep/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goldenTypes are the fixture file prefixes for the types with golden
// vectors from ggml's reference quantizers.
var goldenTypes = map[string]Type{
	"f16": F16, "bf16": BF16, "q4_0": Q4_0, "q4_1": Q4_1, "q5_0": Q5_0, "q5_1": Q5_1,
	"q8_0": Q8_0, "q2_K": Q2_K, "q3_K": Q3_K, "q4_K": Q4_K, "q5_K": Q5_K, "q6_K": Q6_K,
	"tq1_0": TQ1_0, "tq2_0": TQ2_0, "mxfp4": MXFP4, "nvfp4": NVFP4, "iq4_nl": IQ4_NL,
	"iq4_xs": IQ4_XS, "q1_0": Q1_0, "q2_0": Q2_0,
}

// TestDequantizeGolden compares every dequantizer, bit for bit, with
// ggml's to_float output for ggml's own quantization of 4 rows × 1024.
func TestDequantizeGolden(t *testing.T) {
	for prefix, typ := range goldenTypes {
		t.Run(prefix, func(t *testing.T) {
			src := testkit.Read(t, "ggml-quant-golden/"+prefix+".quant.bin")
			want := testkit.Float32s(t, "ggml-quant-golden/"+prefix+".dequant_f32.bin")
			require.Len(t, want, 4*1024)
			// Row by row, as ggml calls it, and all rows in one call.
			got := make([]float32, len(want))
			rb, _ := typ.RowBytes(1024)
			for r := 0; r < 4; r++ {
				require.NoError(t, Dequantize(typ, src[int64(r)*rb:int64(r+1)*rb], got[r*1024:(r+1)*1024]))
			}
			all := make([]float32, len(want))
			require.NoError(t, Dequantize(typ, src, all))
			bad := 0
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(all[i]) != math.Float32bits(want[i]) {
					if bad < 5 {
						t.Errorf("value %d: got %g (%#08x), ggml %g (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
					bad++
				}
			}
			assert.Zero(t, bad, "values that differ, of %d", len(want))
		})
	}
}

func TestDequantizeF32(t *testing.T) {
	src := testkit.Read(t, "ggml-quant-golden/input_f32.bin")
	want := testkit.Float32s(t, "ggml-quant-golden/input_f32.bin")
	got := make([]float32, len(want))
	require.NoError(t, Dequantize(F32, src, got))
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("value %d: %g, want %g", i, got[i], want[i])
		}
	}
}

func TestDequantizeErrors(t *testing.T) {
	cases := []struct {
		typ  Type
		src  int
		dst  int
		want string
	}{
		{Q8_K, 292, 256, "cannot dequantize type Q8_K"},
		{IQ2_XXS, 66, 256, "cannot dequantize type IQ2_XXS"},
		{Type(99), 0, 0, "cannot dequantize type type(99)"},
		{Q1_0, 18, 64, "not a multiple of Q1_0's block of 128"},
		{Q8_0, 33, 32, "33 bytes for 32 values, expected 34"},
		{Q2_0, 36, 64, "36 bytes for 64 values, expected 18"},
	}
	for _, c := range cases {
		err := Dequantize(c.typ, make([]byte, c.src), make([]float32, c.dst))
		assert.ErrorContains(t, err, c.want, c.typ)
	}
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q1_0, Q2_0, Q4_K, NVFP4} {
		assert.True(t, CanDequantize(typ), typ)
		assert.NoError(t, Dequantize(typ, nil, nil), "%s: empty input", typ)
	}
}

// TestScaleTables checks the FP4 scale decoders at values fixed by their
// definitions (OCP MX E8M0; unsigned E4M3 with bias 7), halved as ggml does.
func TestScaleTables(t *testing.T) {
	e8 := map[int]float32{0: 0x1p-128, 1: 0x1p-127, 2: 0x1p-126, 127: 0.5, 128: 1, 254: 0x1p126, 255: 0x1p127}
	for x, w := range e8 {
		assert.Equal(t, w, e8m0Half[x], "e8m0Half[%d]", x)
	}
	ue := map[int]float32{
		0x00: 0, 0x7F: 0, 0x01: 0x1p-10, 0x07: 7 * 0x1p-10, 0x08: 0x1p-7, 0x38: 0.5, 0x39: 0.5625,
		0x7E: 224, 0x78: 128, 0xB8: 0.5, 0xFF: 240,
	}
	for x, w := range ue {
		assert.Equal(t, w, ue4m3Half[x], "ue4m3Half[%#02x]", x)
	}
}

// TestDequantizeHandBlocks decodes blocks built by hand from the format
// descriptions in formats.md §1.3–1.5, covering codes the golden rows may
// not reach.
func TestDequantizeHandBlocks(t *testing.T) {
	one := []byte{0x00, 0x3c} // fp16 1.0
	two := []byte{0x00, 0x40} // fp16 2.0
	q1 := cat(two, []byte{0x01, 0x80}, make([]byte, 14))
	got := make([]float32, 128)
	Dequantize(Q1_0, q1, got)
	if got[0] != 2 || got[1] != -2 || got[15] != 2 || got[14] != -2 || got[127] != -2 {
		t.Errorf("Q1_0: %v", got[:16])
	}
	q2 := cat(two, []byte{0b11100100}, make([]byte, 15))
	got = make([]float32, 64)
	Dequantize(Q2_0, q2, got)
	if got[0] != -2 || got[1] != 0 || got[2] != 2 || got[3] != 4 || got[4] != -2 {
		t.Errorf("Q2_0: %v", got[:5])
	}
	q8 := cat(two, []byte{0x80, 0x7f, 0xff}, make([]byte, 29))
	got = make([]float32, 32)
	Dequantize(Q8_0, q8, got)
	if got[0] != -256 || got[1] != 254 || got[2] != -2 || got[3] != 0 {
		t.Errorf("Q8_0: %v", got[:4])
	}
	q40 := cat(one, []byte{0xF0}, make([]byte, 15))
	Dequantize(Q4_0, q40, got)
	if got[0] != -8 || got[16] != 7 || got[1] != -8 {
		t.Errorf("Q4_0: %v %v", got[0], got[16])
	}
	// Q5_0: qh bit 0 sets bit 4 of element 0, qh bit 16 of element 16.
	q50 := cat(one, le32(1|1<<16), []byte{0x00}, make([]byte, 15))
	Dequantize(Q5_0, q50, got)
	if got[0] != 0 || got[16] != 0 || got[1] != -16 {
		t.Errorf("Q5_0: %v %v %v", got[0], got[16], got[1])
	}
	// MXFP4 e=127 is scale 2^0; the doubled code 7 (12) is halved back to 6.
	mx := cat([]byte{127, 0xF7}, make([]byte, 15))
	Dequantize(MXFP4, mx, got)
	if got[0] != 6 || got[16] != -6 || got[1] != 0 {
		t.Errorf("MXFP4: %v %v", got[0], got[16])
	}
	// TQ2_0: codes 0,1,2 → -1,0,+1 times d; element 32*l+m from bits 2l of qs[m].
	tq2 := cat([]byte{0b00_10_01_00}, make([]byte, 63), two)
	got = make([]float32, 256)
	Dequantize(TQ2_0, tq2, got)
	if got[0] != -2 || got[32] != 0 || got[64] != 2 || got[96] != -2 {
		t.Errorf("TQ2_0: %v %v %v %v", got[0], got[32], got[64], got[96])
	}
	// TQ1_0: byte 0xFF encodes ternary digits via q*3^n; 0 gives all -d.
	tq1 := cat(make([]byte, 52), two)
	Dequantize(TQ1_0, tq1, got)
	for i, v := range got {
		if v != -2 {
			t.Fatalf("TQ1_0 zero block: value %d = %v", i, v)
		}
	}
}

func TestDequantizeAllocs(t *testing.T) {
	src := make([]byte, 1760)
	dst := make([]float32, 4096)
	if n := testing.AllocsPerRun(10, func() { Dequantize(Q3_K, src, dst) }); n != 0 {
		t.Errorf("Dequantize allocated %v times", n)
	}
}

func BenchmarkDequantize(b *testing.B) {
	const n = 1 << 20
	dst := make([]float32, n)
	for _, typ := range []Type{F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q1_0, Q2_0, IQ4_XS, NVFP4} {
		rb, _ := typ.RowBytes(n)
		src := make([]byte, rb)
		for i := range src {
			src[i] = byte(i * 31)
		}
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				Dequantize(typ, src, dst)
			}
		})
	}
}
