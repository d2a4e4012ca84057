package int8

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// checkTokenKernels runs every implementation of dotQ8_0SymRowsTokens
// on rows weight rows (rb bytes apart) and tokens activation rows (xb
// apart) and compares each product with dotQ8_0Go and with the selected
// row kernel per token. The AVX2 kernels take symmetric activations
// only, so the "blocks" and "avx2" forms are checked only for those.
func checkTokenKernels(t *testing.T, w []byte, rb, rows int, x []byte, xb, tokens, nb int) {
	t.Helper()
	sym := true
	for k := range tokens {
		sym = sym && SymmetricQ8_0(x[k*xb:k*xb+nb*BlockBytesQ8_0])
	}
	outStride := rows + 3 // a gap between the tokens' outputs, which stays untouched
	per := make([]float32, rows)
	for set, f := range tokensImpls() {
		if (set == "blocks" || symOnly(set)) && !sym {
			continue
		}
		out := make([]float32, (tokens-1)*outStride+rows+3)
		for i := range out {
			out[i] = -7
		}
		f(w, rb, rows, x, xb, tokens, nb, out, outStride)
		for k := range tokens {
			if sym {
				dotQ8_0SymRows(w, rb, x[k*xb:], nb, per)
			}
			for r := range rows {
				got := out[k*outStride+r]
				if want := dotQ8_0Go(w[r*rb:], x[k*xb:], nb); !blocks.SameFloat(got, want) {
					t.Fatalf("%s: %d rows of %d blocks (%d bytes apart), %d tokens: row %d token %d: %v (%#08x), Go %v (%#08x)", set, rows, nb, rb, tokens, r, k, got, math.Float32bits(got), want, math.Float32bits(want))
				}
				if sym && !blocks.SameFloat(got, per[r]) {
					t.Fatalf("%s: %d rows of %d blocks, %d tokens: row %d token %d: %v, row kernel %v", set, rows, nb, tokens, r, k, got, per[r])
				}
			}
			for i := k*outStride + rows; i < min(len(out), (k+1)*outStride); i++ {
				if out[i] != -7 {
					t.Fatalf("%s: %d rows, %d tokens: wrote out[%d] past token %d's rows", set, rows, tokens, i, k)
				}
			}
		}
	}
}

// TestRowsTokensMatchGo covers 1 to 4 tokens, row counts below, at and
// above the two-stream kernel's eight (with the single-stream rest), and
// rows of whole groups of eight blocks, tails, and both; each case once
// as drawn and once with the activations made symmetric, which the AVX2
// forms take.
func TestRowsTokensMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 2))
	for _, tokens := range []int{1, 2, 3, 4} {
		for _, rows := range []int{1, 3, 8, 9, 16, 21, 40} {
			for _, nb := range []int{1, 7, 8, 9, 16, 21, 64} {
				pad := r.IntN(3) * 5
				rb, xb := nb*BlockBytesQ8_0+pad, nb*BlockBytesQ8_0+r.IntN(2)*34
				w := make([]byte, rows*rb)
				for i := range rows {
					copy(w[i*rb:], randomQ8Row(r, nb))
				}
				x := make([]byte, tokens*xb)
				for k := range tokens {
					copy(x[k*xb:], randomQ8Row(r, nb))
				}
				checkTokenKernels(t, w, rb, rows, x, xb, tokens, nb)
				for k := range tokens {
					symmetric(x[k*xb : k*xb+nb*BlockBytesQ8_0])
				}
				checkTokenKernels(t, w, rb, rows, x, xb, tokens, nb)
			}
		}
	}
}

func TestDotQ8_0SymRowsTokensChecks(t *testing.T) {
	w, x := make([]byte, 4*34), make([]byte, 2*34)
	out := make([]float32, 8)
	DotQ8_0SymRowsTokens(w, 34, 4, x, 34, 2, 32, out, 4)
	DotQ8_0SymRowsTokens(w, 34, 0, x, 34, 2, 32, out, 4)
	for name, f := range map[string]func(){
		"rows":       func() { DotQ8_0SymRowsTokens(w, 34, 5, x, 34, 2, 32, out, 5) },
		"tokens":     func() { DotQ8_0SymRowsTokens(w, 34, 4, x, 34, 3, 32, out, 2) },
		"out":        func() { DotQ8_0SymRowsTokens(w, 34, 4, x, 34, 2, 32, out[:7], 4) },
		"overlap":    func() { DotQ8_0SymRowsTokens(w, 34, 4, x, 34, 2, 32, out, 3) },
		"short rows": func() { DotQ8_0SymRowsTokens(w, 17, 4, x, 34, 2, 32, out, 4) },
		"short x":    func() { DotQ8_0SymRowsTokens(w, 34, 4, x, 17, 2, 32, out, 4) },
		"odd n":      func() { DotQ8_0SymRowsTokens(w, 34, 4, x, 34, 2, 31, out, 4) },
		"neg tokens": func() { DotQ8_0SymRowsTokens(w, 34, 4, x, 34, -1, 32, out, 4) },
	} {
		if !panics(f) {
			t.Errorf("%s: no panic", name)
		}
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}

// FuzzDotQ8_0RowsTokens cuts arbitrary bytes into weight rows (padded to
// a stride or not) and 1 to 4 activation rows, and checks every
// implementation against dotQ8_0Go, then again with the activations
// made symmetric (for the AVX2 forms). The seeds reach two and three
// tokens, the two-stream kernel with its single-stream rest, and rows
// with and without a tail of blocks (nb%8 != 0).
func FuzzDotQ8_0RowsTokens(f *testing.F) {
	f.Add([]byte{9, 8, 1, 2}, bytes.Repeat([]byte{0x00, 0x3c, 0x7f, 0x81}, 1500))        // 10 rows, 9 blocks, 3 tokens
	f.Add([]byte{16, 16, 0, 1}, bytes.Repeat([]byte{0x80, 0x7b, 0x01}, 4000))            // 17 rows, 17 blocks, 2 tokens
	f.Add([]byte{20, 7, 2, 2}, bytes.Repeat([]byte{0x7f, 0x3b, 0x80, 0x01, 0x00}, 2000)) // 21 rows, 8 blocks, 3 tokens
	f.Add([]byte{3, 2, 4, 1}, bytes.Repeat([]byte{0x11, 0x3c, 0x81}, 1000))              // 4 rows, 3 blocks, 2 tokens
	f.Fuzz(func(t *testing.T, shape []byte, data []byte) {
		if len(shape) < 4 {
			return
		}
		rows, nb, pad, tokens := 1+int(shape[0])%24, 1+int(shape[1])%26, int(shape[2])%5, 1+int(shape[3])%4
		rb, xb := nb*BlockBytesQ8_0+pad, nb*BlockBytesQ8_0
		if len(data) < rows*rb+tokens*xb {
			return
		}
		w, x := data[:rows*rb], data[rows*rb:rows*rb+tokens*xb]
		checkTokenKernels(t, w, rb, rows, x, xb, tokens, nb)
		checkTokenKernels(t, w, rb, rows, symmetric(bytes.Clone(x)), xb, tokens, nb)
	})
}
