package int8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
	"github.com/stretchr/testify/assert"
)

// TestMulQ8_0MatchesDot checks every output of MulQ8_0 against DotQ8_0's
// Go reference bit for bit, over shapes that cut the panels and token
// groups short (rows not a multiple of 16, tokens not a multiple of 4,
// rows longer than one panel piece), strided rows, and codes and scales
// with every edge value (−128 codes, ±Inf, NaN, subnormal scales).
func TestMulQ8_0MatchesDot(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := []struct{ rows, tokens, nb int }{
		{1, 1, 1}, {16, 4, 1}, {16, 4, panelBlocks}, {17, 5, panelBlocks + 1},
		{5, 3, 2}, {33, 9, 3 * panelBlocks}, {48, 8, 7}, {40, 12, 176}, {31, 2, 64},
		// Batches the AMX kernel takes (at least 16 tokens).
		{16, 16, 1}, {17, 16, 3}, {1, 17, 2}, {40, 33, 65}, {64, 48, 4}, {15, 31, 9},
	}
	for range 40 {
		cases = append(cases, struct{ rows, tokens, nb int }{1 + r.IntN(70), 1 + r.IntN(11), 1 + r.IntN(2*panelBlocks+3)})
	}
	for range 20 {
		cases = append(cases, struct{ rows, tokens, nb int }{1 + r.IntN(70), 16 + r.IntN(40), 1 + r.IntN(2*panelBlocks+3)})
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%dx%d", c.rows, c.tokens, c.nb), func(t *testing.T) {
			n := c.nb * BlockQ8_0
			rb := c.nb * BlockBytesQ8_0
			wstride := rb + r.IntN(2)*(BlockBytesQ8_0+r.IntN(5))
			xstride := rb + r.IntN(2)*7
			ws := make([][]byte, c.rows)
			for i := range ws {
				ws[i] = randomQ8Row(r, c.nb)
			}
			xs := make([][]byte, c.tokens)
			for i := range xs {
				xs[i] = randomQ8Row(r, c.nb)
			}
			w, x := rowsAt(r, ws, wstride), rowsAt(r, xs, xstride)
			var b Q8_0Batch
			b.Set(x, xstride, c.tokens, n)
			outStride := c.rows + r.IntN(3)
			impls := mulImpls()
			impls["chosen"] = MulQ8_0
			for name, mul := range impls {
				out := make([]float32, (c.tokens-1)*outStride+c.rows)
				for i := range out {
					out[i] = float32(math.NaN())
				}
				mul(w, wstride, c.rows, &b, out, outStride)
				for ti := range c.tokens {
					for ri := range c.rows {
						got := out[ti*outStride+ri]
						if want := dotQ8_0Go(ws[ri], xs[ti], c.nb); !blocks.SameFloat(got, want) {
							t.Fatalf("%s: row %d token %d: %v (%#08x), DotQ8_0 %v (%#08x)", name, ri, ti, got, math.Float32bits(got), want, math.Float32bits(want))
						}
					}
				}
			}
		})
	}
}

// TestMulQ8_0Extremes: every code −128 with the largest scale sums each
// block to 32·2¹⁴, the one product pair int16 multiplies cannot hold in a
// 16-bit sum; and a Set reused for a smaller batch must not leak the old
// rows into the padding.
func TestMulQ8_0Extremes(t *testing.T) {
	nb := 3
	row := make([]byte, nb*BlockBytesQ8_0)
	for k := range nb {
		row[k*BlockBytesQ8_0], row[k*BlockBytesQ8_0+1] = 0x00, 0x3c // 1.0
		for j := 2; j < BlockBytesQ8_0; j++ {
			row[k*BlockBytesQ8_0+j] = 0x80
		}
	}
	w := make([]byte, 0, 20*len(row))
	for range 20 {
		w = append(w, row...)
	}
	var b Q8_0Batch
	big := make([]byte, 0, 7*len(row))
	for range 7 {
		big = append(big, row...)
	}
	b.Set(big, len(row), 7, nb*BlockQ8_0)
	b.Set(w, len(row), 5, nb*BlockQ8_0)
	out := make([]float32, 5*20)
	MulQ8_0(w, len(row), 20, &b, out, 20)
	for i, v := range out {
		if v != 3*524288 {
			t.Fatalf("output %d: %v, want %v", i, v, 3*524288)
		}
	}
}

func TestMulQ8_0BadShapes(t *testing.T) {
	var b Q8_0Batch
	x := make([]byte, 2*BlockBytesQ8_0)
	b.Set(x, BlockBytesQ8_0, 2, BlockQ8_0)
	w := make([]byte, 3*BlockBytesQ8_0)
	assert.Panics(t, func() { MulQ8_0(w, BlockBytesQ8_0, 4, &b, make([]float32, 8), 4) }, "rows beyond w")
	assert.Panics(t, func() { MulQ8_0(w, BlockBytesQ8_0-1, 2, &b, make([]float32, 8), 4) }, "short row stride")
	assert.Panics(t, func() { MulQ8_0(w, BlockBytesQ8_0, 3, &b, make([]float32, 5), 3) }, "out too short")
	assert.Panics(t, func() { MulQ8_0(w, BlockBytesQ8_0, 3, &b, make([]float32, 8), 2) }, "out stride below rows")
	assert.Panics(t, func() { b.Set(x, BlockBytesQ8_0, 3, BlockQ8_0) }, "set beyond x")
	assert.Panics(t, func() { b.Set(x, BlockBytesQ8_0, 1, 16) }, "set partial block")
}

// BenchmarkMulQ8_0 runs products of the 700M llama's shapes (weights per
// second counts every row·token pair) in panels, with each panel kernel
// this CPU runs, against DotQ8_0Sym row by row (the dot-product form,
// lanes over a block's codes).
func BenchmarkMulQ8_0(b *testing.B) {
	for _, shape := range []struct{ rows, n, tokens int }{{256, 2048, 32}, {256, 5632, 32}, {256, 2048, 64}, {2048, 5632, 32}, {5632, 2048, 32}} {
		nb := shape.n / BlockQ8_0
		rb := nb * BlockBytesQ8_0
		w := make([]byte, shape.rows*rb)
		for i := range shape.rows {
			wr, _ := benchRows(shape.n)
			copy(w[i*rb:], wr)
		}
		x := make([]byte, shape.tokens*rb)
		for i := range shape.tokens {
			_, xr := benchRows(shape.n)
			copy(x[i*rb:], xr)
		}
		var q Q8_0Batch
		q.Set(x, rb, shape.tokens, shape.n)
		out := make([]float32, shape.tokens*shape.rows)
		macs := shape.rows * shape.n * shape.tokens
		name := fmt.Sprintf("%dx%dx%d", shape.rows, shape.n, shape.tokens)
		impls := mulImpls()
		for _, set := range []string{"avx2", "avx2+avxvnni", "avx512", "avx512+amx"} {
			if mul := impls[set]; mul != nil {
				b.Run(name+"/panel-"+set, func(b *testing.B) {
					cpubench.Run(b, macs, func() { mul(w, rb, shape.rows, &q, out, shape.rows) })
				})
			}
		}
		b.Run(name+"/rows", func(b *testing.B) {
			cpubench.Run(b, macs, func() {
				for r := range shape.rows {
					for t := range shape.tokens {
						out[t*shape.rows+r] = DotQ8_0Sym(w[r*rb:(r+1)*rb], x[t*rb:(t+1)*rb], shape.n)
					}
				}
			})
		})
	}
}

// rowsAt lays rows out at stride bytes (the gap filled with junk that
// must not be read as part of a row).
func rowsAt(r *rand.Rand, rows [][]byte, stride int) []byte {
	buf := make([]byte, stride*(len(rows)-1)+len(rows[len(rows)-1]))
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for i, row := range rows {
		copy(buf[i*stride:], row)
	}
	return buf
}
