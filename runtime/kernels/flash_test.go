package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// flashCalls is FlashF16 as the calls runtime's flashBlock made before
// the kernel: DotRows per slot, then per head the scalar step, ScaleF16
// and MadF16.
func flashCalls(q, k, v []float32, stride, ns, d int, scale float32, m, sum, o []float32) {
	s := make([]float32, len(m))
	for j := range ns {
		kj := k[j*stride : j*stride+d]
		vj := v[j*stride : j*stride+d]
		DotRows(kj, q[:len(m)*d], s)
		for h := range m {
			oh := o[h*d : (h+1)*d]
			sv := s[h] * scale
			ms, vs := float32(1), float32(1)
			if sv > m[h] {
				ms = Expf(m[h] - sv)
				m[h] = sv
				ScaleF16(ms, oh)
			} else {
				vs = Expf(sv - m[h])
			}
			MadF16(vs, vj, oh)
			sum[h] = sum[h]*ms + vs
		}
	}
}

// flashPureGo is flashCalls on the Go kernels only.
func flashPureGo(q, k, v []float32, stride, ns, d int, scale float32, m, sum, o []float32) {
	flashSteps(dotF32Go, scaleF16Go, madF16Go, q, k, v, stride, ns, d, scale, m, sum, o)
}

type namedFlash struct {
	name string
	f    flashFunc
}

// flashKernels are the kernels to test: FlashF16 as selected, and on
// amd64 each assembly form the CPU runs (flashAsmKernels).
func flashKernels() []namedFlash {
	return append([]namedFlash{{"FlashF16", FlashF16}}, flashAsmKernels...)
}

// flashCase is one FlashF16 call's operands.
type flashCase struct {
	q, k, v, m, sum, o []float32
	stride, ns, d      int
	scale              float32
}

// newFlashCase draws a case: values from headValue one time in edge
// (never when edge is 0, always when 1), the cache and outputs rounded
// to binary16 as the runtime keeps them, and a state as after some slots
// (or fresh: max −Inf, sum 0, output 0), and some K rows repeated.
func newFlashCase(r *rand.Rand, hc, d, ns int, edge int) flashCase {
	val := func() float32 {
		if edge > 0 && r.IntN(edge) == 0 {
			return headValue(r)
		}
		return float32(r.NormFloat64())
	}
	fill := func(n int, round bool) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = val()
			if round {
				x[i] = f16(x[i])
			}
		}
		return x
	}
	stride := d + r.IntN(3)*8
	c := flashCase{stride: stride, ns: ns, d: d, scale: float32(1 / math.Sqrt(float64(max(d, 1))))}
	if r.IntN(4) == 0 {
		c.scale = val()
	}
	n := (ns-1)*stride + d + r.IntN(2)*stride
	c.q, c.k, c.v = fill(hc*d, true), fill(n, true), fill(n, true)
	// Repeated K rows tie a score with the max (not a move).
	for j := 1; j < ns; j++ {
		if r.IntN(3) == 0 {
			copy(c.k[j*stride:j*stride+d], c.k[(j-1)*stride:])
		}
	}
	c.m, c.sum, c.o = make([]float32, hc), make([]float32, hc), make([]float32, hc*d)
	if r.IntN(2) == 0 {
		for h := range c.m {
			c.m[h] = float32(math.Inf(-1))
		}
	} else {
		// An output off the binary16 grid shows whether it was scaled
		// (by a factor that may be 1).
		c.m, c.sum, c.o = fill(hc, false), fill(hc, false), fill(hc*d, r.IntN(2) == 0)
		for h := range c.sum {
			c.sum[h] = float32(math.Abs(float64(c.sum[h])))
			if d > 0 && r.IntN(2) == 0 {
				// The first slot's score ties with the max.
				c.m[h] = Dot(c.k[:d], c.q[h*d:(h+1)*d]) * c.scale
			}
		}
	}
	return c
}

func (c flashCase) clone() flashCase {
	cp := func(x []float32) []float32 { return append([]float32(nil), x...) }
	c.m, c.sum, c.o = cp(c.m), cp(c.sum), cp(c.o)
	return c
}

type flashFunc = func(q, k, v []float32, stride, ns, d int, scale float32, m, sum, o []float32)

// run applies f to a copy of c's state and returns the copy.
func (c flashCase) run(f flashFunc) flashCase {
	c = c.clone()
	f(c.q, c.k, c.v, c.stride, c.ns, c.d, c.scale, c.m, c.sum, c.o)
	return c
}

// flashDiff describes the first difference between two results, bit for
// bit (anyNaN: NaN equal to NaN), or returns "".
func flashDiff(got, want flashCase, anyNaN bool) string {
	for _, p := range []struct {
		name string
		g, w []float32
	}{{"max", got.m, want.m}, {"sum", got.sum, want.sum}, {"o", got.o, want.o}} {
		for i := range p.w {
			if math.Float32bits(p.g[i]) != math.Float32bits(p.w[i]) && !(anyNaN && blocks.SameFloat(p.g[i], p.w[i])) {
				return fmt.Sprintf("%s[%d] = %v (%#x), want %v (%#x)", p.name, i, p.g[i], math.Float32bits(p.g[i]), p.w[i], math.Float32bits(p.w[i]))
			}
		}
	}
	return ""
}

// TestFlashF16MatchesCalls: FlashF16 (assembly where the CPU has it) gives
// the bits of the calls it replaces and of the Go kernels, for head sizes
// with assembly (multiples of 32 up to 256) and without, 1 to 16 heads (past the
// eight lanes of one assembly call), fresh and running states, and
// ordinary values, rare edge values, and only edge values (−0, ±Inf, NaN,
// tiny, huge). Against the calls even a NaN's bits must agree; the Go
// kernels' NaNs may differ in sign and payload (as MadF16's test allows).
func TestFlashF16MatchesCalls(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, d := range []int{64, 128, 256, 32, 96, 40, 0, 288} {
		for _, hc := range []int{1, 2, 3, 4, 7, 8, 9, 16} {
			for _, edge := range []int{0, 16, 1} {
				t.Run(fmt.Sprintf("d%d/h%d/edge%d", d, hc, edge), func(t *testing.T) {
					for iter := range 12 {
						c := newFlashCase(r, hc, d, 1+iter*7, edge) // past one call's 64 slots
						want := c.run(flashCalls)
						for _, k := range flashKernels() {
							if diff := flashDiff(c.run(k.f), want, false); diff != "" {
								t.Fatalf("iter %d, %d slots: %s: %s", iter, c.ns, k.name, diff)
							}
						}
						if diff := flashDiff(c.run(flashPureGo), want, true); diff != "" {
							t.Fatalf("iter %d, %d slots: Go kernels: %s", iter, c.ns, diff)
						}
					}
				})
			}
		}
	}
}

// BenchmarkFlashF16 times one token's walk over a tile of 64 slots for a
// GQA group of 8 heads of 64 (700M's attention, Llama 3's group), per
// slot.
func BenchmarkFlashF16(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range flashKernels() {
		for _, d := range []int{64, 128} {
			b.Run(fmt.Sprintf("%s/d%d", k.name, d), func(b *testing.B) {
				c := newFlashCase(r, 8, d, 64, 0)
				c.stride = 4 * d
				c.k, c.v = make([]float32, 64*c.stride), make([]float32, 64*c.stride)
				for i := range c.k {
					c.k[i], c.v[i] = f16(float32(r.NormFloat64())), f16(float32(r.NormFloat64()))
				}
				b.ResetTimer()
				for range b.N {
					k.f(c.q, c.k, c.v, c.stride, c.ns, c.d, c.scale, c.m, c.sum, c.o)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/slot")
			})
		}
	}
}
