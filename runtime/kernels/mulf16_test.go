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

// TestMulF16MatchesDot checks every output of MulF16 and MulBF16 against
// the Go dot products bit for bit (NaN for NaN): short last panels and
// token groups, strided rows and activations, lengths the panels do not
// take (not a multiple of 32), weights drawn from all 16-bit patterns
// (NaN, ±Inf, subnormals, −0) as well as ordinary values, and BF16
// operands whose products underflow (tinyBF16).
func TestMulF16MatchesDot(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	cases := []struct{ rows, tokens, n int }{
		{1, 1, 32}, {8, 3, 32}, {9, 4, 64}, {16, 7, 96}, {5, 2, 40}, {24, 6, 2048}, {3, 1, 8}, {17, 5, 160},
	}
	for range 20 {
		cases = append(cases, struct{ rows, tokens, n int }{1 + r.IntN(20), 1 + r.IntN(8), 32 * (1 + r.IntN(6))})
	}
	for _, f := range formats {
		for _, c := range cases {
			for _, bits := range []string{"normal", "any", "tiny"} {
				if bits == "tiny" && f != bf16Fmt {
					continue
				}
				t.Run(fmt.Sprintf("%s/%dx%dx%d/%s", f.name, c.rows, c.tokens, c.n, bits), func(t *testing.T) {
					f.checkMul(t, r, c.rows, c.tokens, c.n, bits)
				})
			}
		}
	}
}

// checkMul holds f.mul and f.muls to f's Go twin on random operands of
// the given shape: bits "normal" (rounded normal values), "any" (any
// weight pattern, one activation in ten) or "tiny" (tinyBF16).
func (f *format) checkMul(t *testing.T, r *rand.Rand, rows, tokens, n int, bits string) {
	rowBytes := 2*n + 2*r.IntN(3)
	w := make([]byte, (rows-1)*rowBytes+2*n)
	for i := 0; i+1 < len(w); i += 2 {
		h := f.round(float32(r.NormFloat64()))
		switch bits {
		case "any":
			h = uint16(r.Uint32())
		case "tiny":
			h = tinyBF16(r)
		}
		binary.LittleEndian.PutUint16(w[i:], h)
	}
	xstride := n + r.IntN(3)
	x := make([]float32, (tokens-1)*xstride+n)
	for i := range x {
		x[i] = f.act(f.round(float32(r.NormFloat64() * 4)))
		if bits == "any" && r.IntN(10) == 0 {
			x[i] = f.act(uint16(r.Uint32()))
		}
		if bits == "tiny" {
			x[i] = f.act(tinyBF16(r))
		}
	}
	outStride := rows + r.IntN(3)
	out := make([]float32, (tokens-1)*outStride+rows)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	var b F16Batch
	b.Set(x, xstride, tokens, n)
	for _, k := range append([]mulF16Kernel{{"selected", f.mul}}, f.muls...) {
		k.mul(w, rowBytes, rows, &b, out, outStride)
		for ti := range tokens {
			for ri := range rows {
				want := f.twin(u16View(w[ri*rowBytes:], n), x[ti*xstride:ti*xstride+n])
				if got := out[ti*outStride+ri]; !blocks.SameFloat(got, want) {
					t.Fatalf("%s %s: row %d token %d: %v (%#08x), Go %v (%#08x)", f.name, k.name, ri, ti, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		}
	}
}

// mulF16Kernel is a MulF16 or MulBF16 kernel.
type mulF16Kernel struct {
	name string
	mul  mulFunc
}

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
		for _, k := range append([]mulF16Kernel{{"panel", MulF16}}, f16Fmt.muls...) {
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
