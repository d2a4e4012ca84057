package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/testkit/blocks"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// TestMulF16MatchesDot checks every output of MulF16 against DotF16F32
// bit for bit (NaN for NaN): short last panels and token groups, strided
// rows and activations, lengths the panels do not take (not a multiple of
// 32), and weights drawn from all binary16 bit patterns (NaN, ±Inf,
// subnormals, −0) as well as ordinary values.
func TestMulF16MatchesDot(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	cases := []struct{ rows, tokens, n int }{
		{1, 1, 32}, {8, 3, 32}, {9, 4, 64}, {16, 7, 96}, {5, 2, 40}, {24, 6, 2048}, {3, 1, 8}, {17, 5, 160},
	}
	for range 20 {
		cases = append(cases, struct{ rows, tokens, n int }{1 + r.IntN(20), 1 + r.IntN(8), 32 * (1 + r.IntN(6))})
	}
	for _, c := range cases {
		for _, bits := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%dx%d/bits=%v", c.rows, c.tokens, c.n, bits), func(t *testing.T) {
				rowBytes := 2*c.n + 2*r.IntN(3)
				w := make([]byte, (c.rows-1)*rowBytes+2*c.n)
				for i := 0; i+1 < len(w); i += 2 {
					h := half.F32ToF16(float32(r.NormFloat64()))
					if bits {
						h = uint16(r.Uint32())
					}
					binary.LittleEndian.PutUint16(w[i:], h)
				}
				xstride := c.n + r.IntN(3)
				x := make([]float32, (c.tokens-1)*xstride+c.n)
				for i := range x {
					x[i] = half.F16ToF32(half.F32ToF16(float32(r.NormFloat64() * 4)))
					if bits && r.IntN(10) == 0 {
						x[i] = half.F16ToF32(uint16(r.Uint32()))
					}
				}
				outStride := c.rows + r.IntN(3)
				out := make([]float32, (c.tokens-1)*outStride+c.rows)
				for i := range out {
					out[i] = float32(math.NaN())
				}
				var b F16Batch
				b.Set(x, xstride, c.tokens, c.n)
				for _, k := range append([]mulF16Kernel{{"selected", MulF16}}, mulF16Kernels...) {
					k.mul(w, rowBytes, c.rows, &b, out, outStride)
					for ti := range c.tokens {
						for ri := range c.rows {
							want := dotF16F32Go(u16View(w[ri*rowBytes:], c.n), x[ti*xstride:ti*xstride+c.n])
							if got := out[ti*outStride+ri]; !blocks.SameFloat(got, want) {
								t.Fatalf("%s: row %d token %d: %v (%#08x), Go %v (%#08x)", k.name, ri, ti, got, math.Float32bits(got), want, math.Float32bits(want))
							}
						}
					}
				}
			})
		}
	}
}

type mulF16Kernel struct {
	name string
	mul  func(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int)
}

// mulF16Kernels are the MulF16 kernels this CPU runs besides the selected
// one (the AVX2 fallback where AVX-512 is selected), each held to the Go
// twin too.
var mulF16Kernels []mulF16Kernel

func TestMulF16BadShapes(t *testing.T) {
	w := make([]byte, 3*64)
	x := make([]float32, 2*32)
	var b F16Batch
	b.Set(x, 32, 2, 32)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"rows beyond w", func() { MulF16(w, 64, 4, &b, make([]float32, 8), 4) }},
		{"row stride short", func() { MulF16(w, 63, 2, &b, make([]float32, 8), 4) }},
		{"set beyond x", func() { b.Set(x, 32, 3, 32) }},
		{"out short", func() { MulF16(w, 64, 3, &b, make([]float32, 5), 3) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			c.f()
		}()
	}
}

// BenchmarkMulF16 runs a 700M-llama FFN product for 32 tokens in panels
// (the selected kernel, then each one this CPU runs: AVX2 and AVX-512 side
// by side) and as DotF16F32 row by row, token by token.
func BenchmarkMulF16(b *testing.B) {
	for _, shape := range []struct{ rows, n int }{{512, 2048}, {256, 5632}} {
		const tokens = 32
		r := rand.New(rand.NewPCG(1, 2))
		w := make([]byte, shape.rows*2*shape.n)
		for i := 0; i < len(w); i += 2 {
			binary.LittleEndian.PutUint16(w[i:], half.F32ToF16(float32(r.NormFloat64())))
		}
		x := make([]float32, tokens*shape.n)
		for i := range x {
			x[i] = half.F16ToF32(half.F32ToF16(float32(r.NormFloat64())))
		}
		out := make([]float32, tokens*shape.rows)
		macs := float64(shape.rows * shape.n * tokens)
		n, rb := shape.n, 2*shape.n
		var xb F16Batch
		xb.Set(x, n, tokens, n)
		for _, k := range append([]mulF16Kernel{{"panel", MulF16}}, mulF16Kernels...) {
			b.Run(fmt.Sprintf("%dx%d/%s", shape.rows, shape.n, k.name), func(b *testing.B) {
				cpubench.Run(b, 0, func() { k.mul(w, rb, shape.rows, &xb, out, shape.rows) })
				b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
		b.Run(fmt.Sprintf("%dx%d/rows", shape.rows, shape.n), func(b *testing.B) {
			for b.Loop() {
				for r := range shape.rows {
					row := w[r*rb : (r+1)*rb]
					for t := range tokens {
						out[t*shape.rows+r] = DotF16F32(row, x[t*n:(t+1)*n])
					}
				}
			}
			b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}
