package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// expInputs covers the whole useful range densely, the clamp edges, the
// special values and every tail length.
func expInputs(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	edges := []float32{0, float32(math.Copysign(0, -1)), expHi, expLo, math.Nextafter32(expHi, 100),
		math.Nextafter32(expLo, -100), 88.7, -88, -103, 1e-30, -1e-30, float32(math.Inf(1)),
		float32(math.Inf(-1)), float32(math.NaN()), 3e38, -3e38, 0.5 * float32(math.Ln2), -0.5 * float32(math.Ln2)}
	for i := range x {
		switch r.IntN(8) {
		case 0:
			x[i] = edges[r.IntN(len(edges))]
		case 1:
			x[i] = float32(r.NormFloat64())
		default:
			x[i] = float32(r.Float64()*180 - 90)
		}
	}
	return x
}

// ulps is the distance between a and b in units in the last place.
func ulps(a, b float32) int64 {
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if d := ia - ib; d >= 0 {
		return d
	} else {
		return -d
	}
}

func TestExpfAccuracy(t *testing.T) {
	var worst int64
	var at float32
	// Every 97th float32 of [−87.3, 88.3] (about 10⁷ values).
	for b := math.Float32bits(expLo); b > 0x80000000; b -= 97 {
		x := math.Float32frombits(b)
		if d := ulps(Expf(x), float32(math.Exp(float64(x)))); d > worst {
			worst, at = d, x
		}
	}
	for b := uint32(0); b <= math.Float32bits(expHi); b += 97 {
		x := math.Float32frombits(b)
		if d := ulps(Expf(x), float32(math.Exp(float64(x)))); d > worst {
			worst, at = d, x
		}
	}
	t.Logf("worst %d ulp at %g", worst, at)
	if worst > 2 {
		t.Errorf("Expf is %d ulp from math.Exp at %g, want at most 2", worst, at)
	}
	for _, c := range []struct{ x, want float32 }{
		{0, 1}, {float32(math.Inf(-1)), 0}, {-100, 0}, {float32(math.Inf(1)), float32(math.Inf(1))}, {89, float32(math.Inf(1))},
	} {
		if got := Expf(c.x); got != c.want {
			t.Errorf("Expf(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if v := Expf(float32(math.NaN())); v == v {
		t.Errorf("Expf(NaN) = %g", v)
	}
	if Expf(expHi) > math.MaxFloat32 || Expf(expLo) == 0 {
		t.Errorf("Expf at the clamp edges: %g, %g", Expf(expHi), Expf(expLo))
	}
}

// TestExpVectorMatchesScalar checks the assembly (when in use) against
// Expf and Silu (Exp, SiluMul, SiluSlice), bit for bit, for every length up to 80 and a long row.
func TestExpVectorMatchesScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, n := range append(sizes, 1<<16) {
		x := expInputs(r, n)
		u := expInputs(r, n)
		e := append([]float32(nil), x...)
		Exp(e)
		g := append([]float32(nil), x...)
		SiluMul(g, u)
		sl := append([]float32(nil), x...)
		SiluSlice(sl)
		for i, v := range x {
			if !blocks.SameFloat(sl[i], Silu(v)) {
				t.Fatalf("n=%d: SiluSlice(%g) = %g, Silu %g", n, v, sl[i], Silu(v))
			}
			if !blocks.SameFloat(e[i], Expf(v)) {
				t.Fatalf("n=%d: Exp(%g) = %g (%#x), Expf %g (%#x)", n, v, e[i], math.Float32bits(e[i]), Expf(v), math.Float32bits(Expf(v)))
			}
			if want := float32(Silu(v) * u[i]); !blocks.SameFloat(g[i], want) {
				t.Fatalf("n=%d: SiluMul(%g, %g) = %g, want %g", n, v, u[i], g[i], want)
			}
		}
	}
	if !same(expVec, expGo) {
		t.Log("vector form in use")
	}
}

func TestSilu(t *testing.T) {
	for _, x := range []float32{-90, -20, -1, -1e-3, 0, 1e-3, 1, 20, 90} {
		want := float64(x) / (1 + math.Exp(-float64(x)))
		if got := float64(Silu(x)); math.Abs(got-want) > 2e-7*math.Max(math.Abs(want), 1e-30) && math.Abs(got-want) > 1e-37 {
			t.Errorf("Silu(%g) = %g, want %g", x, got, want)
		}
	}
}

func BenchmarkSiluMul(b *testing.B) {
	// FFN activations: normal values, no denormal products.
	r := rand.New(rand.NewPCG(1, 2))
	g, u := make([]float32, 5632), make([]float32, 5632)
	for i := range g {
		g[i], u[i] = float32(3*r.NormFloat64()), float32(r.NormFloat64())
	}
	g0 := append([]float32(nil), g...)
	b.Run("vector", func(b *testing.B) {
		for b.Loop() {
			copy(g, g0)
			SiluMul(g, u)
		}
		b.ReportMetric(float64(len(g))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
	})
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			copy(g, g0)
			siluMulGo(g, u)
		}
		b.ReportMetric(float64(len(g))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
	})
}
