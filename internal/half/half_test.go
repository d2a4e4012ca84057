package half

import (
	"math"
	"testing"
)

func TestF16RoundTripEveryPattern(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := F16ToF32(h)
		if f != f { // NaN: only check it stays NaN
			if g := F16ToF32(F32ToF16(f)); g == g {
				t.Fatalf("NaN %#04x did not survive", h)
			}
			continue
		}
		if back := F32ToF16(f); back != h {
			t.Fatalf("F16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
}

func TestRoundingTiesToEven(t *testing.T) {
	cases := []struct {
		in   float32
		f16  uint16
		bf16 uint16
	}{
		{1, 0x3c00, 0x3f80},
		{-2, 0xc000, 0xc000},
		{1 + 1.0/2048, 0x3c00, 0x3f80},                     // halfway between 1 and next f16: even is 1
		{1 + 3.0/2048, 0x3c02, 0x3f80},                     // halfway, rounds up to even
		{math.Float32frombits(0x3f808000), 0x3c04, 0x3f80}, // bf16 tie -> even (down)
		{math.Float32frombits(0x3f818000), 0x3c0c, 0x3f82}, // bf16 tie -> even (up)
		{65520, 0x7c00, 0x4780},                            // overflows f16 to +Inf
	}
	for _, c := range cases {
		if got := F32ToF16(c.in); got != c.f16 {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", c.in, got, c.f16)
		}
		if got := F32ToBF16(c.in); got != c.bf16 {
			t.Errorf("F32ToBF16(%v) = %#04x, want %#04x", c.in, got, c.bf16)
		}
	}
}

func TestSliceConversions(t *testing.T) {
	src := []byte{0x00, 0x3c, 0x00, 0xc0}
	dst := make([]float32, 2)
	F16SliceToF32(dst, src)
	if dst[0] != 1 || dst[1] != -2 {
		t.Fatalf("F16SliceToF32 = %v", dst)
	}
	BF16SliceToF32(dst, []byte{0x80, 0x3f, 0x00, 0xc0})
	if dst[0] != 1 || dst[1] != -2 {
		t.Fatalf("BF16SliceToF32 = %v", dst)
	}
}
