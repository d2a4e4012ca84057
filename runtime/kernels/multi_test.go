package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// multiKernel is a multi-token rows kernel (2 or 3 tokens).
type multiKernel struct {
	name string
	mul  func(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int)
}

// checkMulti holds f's RowsMulti (1 to 7 tokens) and every multi-token
// kernel (2 and 3: f.multis, the Go twin and each set this CPU runs) to
// f's Rows per token and the Go twin per row and token, bit for bit, and
// checks that nothing is written between the tokens' results (ldo =
// rows+3).
func (f *format) checkMulti(t *testing.T, w []byte, rowBytes, rows int, x []float32, n int) {
	t.Helper()
	maxTokens := len(x) / n
	ldo := rows + 3
	sentinel := math.Float32frombits(0x7fc0dead)
	want := make([]float32, maxTokens*ldo)
	for tk := range maxTokens {
		xt := x[tk*n : (tk+1)*n]
		f.rows(w, rowBytes, xt, want[tk*ldo:tk*ldo+rows])
		for r := range rows {
			if g := f.twin(u16View(w[r*rowBytes:], n), xt); !blocks.SameFloat(g, want[tk*ldo+r]) {
				t.Fatalf("%s n=%d rows=%d: Rows token %d row %d: %v, Go %v", f.name, n, rows, tk, r, want[tk*ldo+r], g)
			}
		}
	}
	out := make([]float32, maxTokens*ldo)
	run := func(name string, tokens int, mul func(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int)) {
		for i := range out {
			out[i] = sentinel
		}
		mul(w, rowBytes, rows, x[:tokens*n], n, out, ldo)
		for tk := range tokens {
			for r := range ldo {
				got, i := out[tk*ldo+r], tk*ldo+r
				if r >= rows {
					if math.Float32bits(got) != math.Float32bits(sentinel) {
						t.Fatalf("%s %s n=%d rows=%d tokens=%d: wrote %v at token %d, %d", f.name, name, n, rows, tokens, got, tk, r)
					}
					continue
				}
				if !blocks.SameFloat(got, want[i]) {
					t.Fatalf("%s %s n=%d rows=%d tokens=%d: token %d row %d: %v, per token %v", f.name, name, n, rows, tokens, tk, r, got, want[i])
				}
			}
		}
	}
	for tokens := 1; tokens <= maxTokens; tokens++ {
		run("RowsMulti", tokens, f.multi)
		if tokens == 2 || tokens == 3 {
			run("selected", tokens, f.multiSel)
			for _, k := range f.multis {
				run(k.name, tokens, k.mul)
			}
		}
	}
}

// multiOperands returns rows of n random 16-bit weights of f rowBytes
// apart (rowBytes ≥ 2n) from offset off of the slice, and tokens rows of n
// activations, some any bit pattern (subnormal, huge, ±Inf, NaN); with
// tiny set, BF16 operands whose products mostly underflow (tinyBF16).
func (f *format) multiOperands(r *rand.Rand, rows, rowBytes, off, n, tokens int, tiny bool) ([]byte, []float32) {
	w := make([]byte, off+(rows-1)*rowBytes+2*n)
	for i := range w {
		w[i] = byte(r.Uint32())
		if tiny && i%2 == 1 {
			h := tinyBF16(r)
			w[i-1], w[i] = byte(h), byte(h>>8)
		}
	}
	xh := randomU16(r, tokens*n, f.round)
	x := make([]float32, len(xh))
	for i, h := range xh {
		if tiny {
			h = tinyBF16(r)
		}
		x[i] = f.act(h)
	}
	return w[off:], x
}

// TestDotF16F32RowsMulti covers every length class (whole groups of 32,
// the AVX2 forms' 256-element turns and a shorter last turn, tails), row
// counts with and without rows left over from the quads, strided and
// odd-offset rows.
func TestDotF16F32RowsMulti(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, f := range formats {
		for _, n := range []int{1, 8, 31, 32, 64, 96, 100, 256, 288, 800, 2048, 5632} {
			for _, rows := range []int{1, 3, 4, 5, 7, 8, 12, 13} {
				rowBytes := 2*n + 2*r.IntN(3)
				tiny := f == bf16Fmt && rows%4 == 1
				w, x := f.multiOperands(r, rows, rowBytes, r.IntN(2), n, 5, tiny)
				f.checkMulti(t, w, rowBytes, rows, x, n)
			}
		}
	}
}

// TestDotF16F32RowsMultiChecks checks the panics and the empty cases
// (DotBF16F32RowsMulti's are the same code).
func TestDotF16F32RowsMultiChecks(t *testing.T) {
	DotF16F32RowsMulti(nil, 0, 0, make([]float32, 4), 2, nil, 0)
	DotF16F32RowsMulti(nil, 0, 3, nil, 2, nil, 0)
	for name, f := range map[string]func(){
		"x":   func() { DotF16F32RowsMulti(make([]byte, 64), 8, 2, make([]float32, 7), 4, make([]float32, 8), 2) },
		"w":   func() { DotF16F32RowsMulti(make([]byte, 15), 8, 2, make([]float32, 8), 4, make([]float32, 8), 2) },
		"ldo": func() { DotF16F32RowsMulti(make([]byte, 16), 8, 2, make([]float32, 8), 4, make([]float32, 8), 1) },
		"out": func() { DotF16F32RowsMulti(make([]byte, 16), 8, 2, make([]float32, 8), 4, make([]float32, 3), 2) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// FuzzRowsMulti feeds arbitrary weight and activation bits to the
// multi-token kernels, F16 and BF16. The shape bytes choose the tokens (1
// to 4), the rows (1 to 13) and the length: whole groups of 32 (up to 384,
// several AVX2 turns) when the third is below 128, else any up to 100.
func FuzzRowsMulti(f *testing.F) {
	// The seeds' bytes make finite binary16 values in either byte order
	// (no high byte has the exponent all ones), so a product taken from the
	// wrong token or lane shows in the sums; the patterns' odd periods make
	// the tokens' activations differ.
	//
	// Two tokens, 5 rows of 64 (one quad, a row left over).
	f.Add([]byte{1, 4, 1}, bytes.Repeat([]byte{0x01, 0x3c, 0xb8, 0x7b, 0x00, 0x80, 0x55, 0x03, 0x9a}, 300))
	// Three tokens, 9 rows of 288 (two quads, a 256- and a 32-element
	// AVX2 turn).
	f.Add([]byte{2, 8, 8}, bytes.Repeat([]byte{0x00, 0x80, 0x35, 0x2e, 0x01, 0x3c, 0x66, 0xb8, 0x13, 0x42, 0xc1}, 700))
	// Four tokens (three and one), 6 rows of 45 (no assembly).
	f.Add([]byte{3, 5, 172}, bytes.Repeat([]byte{0x35, 0x00, 0xbe, 0x2c, 0x41}, 400))
	f.Fuzz(func(t *testing.T, shape, data []byte) {
		if len(shape) < 3 {
			return
		}
		tokens, rows := 1+int(shape[0])%4, 1+int(shape[1])%13
		n := 32 * (1 + int(shape[2])%12)
		if shape[2] >= 128 {
			n = 1 + int(shape[2])%100
		}
		if len(data) < 2*(rows*n+tokens*n) {
			return
		}
		w := data[:2*rows*n]
		x := make([]float32, tokens*n)
		for _, f := range formats {
			for i := range x {
				x[i] = f.act(binary.LittleEndian.Uint16(data[2*rows*n+2*i:]))
			}
			f.checkMulti(t, w, 2*n, rows, x, n)
		}
	})
}
