package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// tinyBF16 returns bfloat16 bits whose products mostly underflow float32
// (|w·x| < 2⁻¹²⁶), where fused and unfused steps can differ: a product
// below 2⁻¹³⁴ has bits below 2⁻¹⁴⁹ that rounding it first drops, which
// changes the sum when it then lands on a tie of the sum's grid (2⁻¹⁴⁸ for
// sums in [2⁻¹²⁵, 2⁻¹²⁴)). So most magnitudes are 2⁻⁷⁵..2⁻⁶⁷ (products
// 2⁻¹⁵⁰..2⁻¹³⁴) and a quarter 2⁻⁶³..2⁻⁶² (products up to 2⁻¹²⁴, sums of
// that scale); some are subnormal bfloat16 values or ±0. No ordinary
// values: their products would absorb the tiny ones (the other tests'
// random operands cover those).
func tinyBF16(r *rand.Rand) uint16 {
	sign := uint16(r.IntN(2)) << 15
	m := uint16(r.IntN(128))
	switch k := r.IntN(64); {
	case k < 3:
		return sign // ±0
	case k < 6:
		return sign | m // subnormal (or zero)
	case k < 22:
		return sign | uint16(64+r.IntN(2))<<7 | m
	default:
		return sign | uint16(52+r.IntN(9))<<7 | m
	}
}

// dotBF16Unfused is the BF16 dot product with each product rounded
// before it is added: what the package defined before the fused steps.
func dotBF16Unfused(w, x []uint16) float32 {
	var l lanes
	for i := range x {
		j := i % 32
		if i >= len(x)&^31 {
			j = i % 8
		}
		l[j] += float32(bf16(w[i]) * bf16(x[i]))
	}
	return l.sum()
}

// TestDotBF16Fused checks the fused definition on values chosen by hand
// and that tinyBF16's operands tell fused from unfused kernels apart, so
// that the comparisons with them can fail.
func TestDotBF16Fused(t *testing.T) {
	u := func(v float32) uint16 { return half.F32ToBF16(v) }
	p75, p74 := u(float32(math.Ldexp(1, -75))), u(float32(math.Ldexp(1, -74)))
	// Lane 0 takes 2⁻¹⁴⁹ (element 0), then 2⁻¹⁵⁰ (element 32): fused,
	// 1.5·2⁻¹⁴⁹ rounds to even, 2⁻¹⁴⁸; unfused 2⁻¹⁵⁰ rounds to 0 first.
	w, x := make([]uint16, 33), make([]uint16, 33)
	w[0], x[0] = p75, p74
	w[32], x[32] = p75, p75
	if got, want := DotBF16(wBytes(w), x), float32(math.Ldexp(1, -148)); got != want {
		t.Errorf("tie in lane 0: %v, want %v", got, want)
	}
	if got := dotBF16Unfused(w, x); got != float32(math.Ldexp(1, -149)) {
		t.Errorf("unfused tie: %v", got)
	}
	// 37 products −2⁻¹⁵⁰ round to −0 in every lane, fused: the result is
	// −0, also through the assembly's padded tail (three elements).
	for _, n := range []int{32, 37, 40, 64, 69} {
		w, x := make([]uint16, n), make([]uint16, n)
		for i := range w {
			w[i], x[i] = p75|0x8000, p75
		}
		for name, got := range map[string]float32{"DotBF16": DotBF16(wBytes(w), x), "Go": dotBF16Go(w, x)} {
			if math.Float32bits(got) != 0x80000000 {
				t.Errorf("%s n=%d: −2⁻¹⁵⁰ each: %v (%#x), want −0", name, n, got, math.Float32bits(got))
			}
		}
		bf16Fmt.checkF32Acts(t, w, x, dotBF16Go(w, x))
		if got := dotBF16Unfused(w, x); math.Float32bits(got) != 0 {
			t.Errorf("unfused n=%d: %v, want +0", n, got)
		}
	}
	r := rand.New(rand.NewPCG(41, 42))
	differ := 0
	for range 200 {
		n := 32 + r.IntN(1000)
		w, x := make([]uint16, n), make([]uint16, n)
		for i := range w {
			w[i], x[i] = tinyBF16(r), tinyBF16(r)
		}
		if !blocks.SameFloat(dotBF16Go(w, x), dotBF16Unfused(w, x)) {
			differ++
		}
	}
	t.Logf("fused and unfused differ on %d of 200 tiny dot products", differ)
	if differ < 50 {
		t.Errorf("fused and unfused differ on %d of 200 tiny dot products, want most", differ)
	}
}

// TestDotBF16Tiny holds every BF16 kernel to the fused Go twin on
// operands whose products underflow, for every length class.
func TestDotBF16Tiny(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, n := range sizes {
		for range 4 {
			w, x := make([]uint16, n), make([]uint16, n)
			for i := range w {
				w[i], x[i] = tinyBF16(r), tinyBF16(r)
			}
			want := dotBF16Go(w, x)
			if got := DotBF16(wBytes(w), x); !blocks.SameFloat(got, want) {
				t.Fatalf("DotBF16 n=%d: %v, Go %v", n, got, want)
			}
			if n > 0 {
				checkBF16F32(t, w, x)
			}
		}
	}
}

func wBytes(w []uint16) []byte {
	b := make([]byte, 2*len(w))
	for i, h := range w {
		b[2*i], b[2*i+1] = byte(h), byte(h>>8)
	}
	return b
}
