package int8

import (
	"bytes"
	"math"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// FuzzDotQ8_0 feeds arbitrary bytes to the selected kernel (assembly on
// AVX2 machines) and the Go one: they must agree bit for bit. The first
// byte picks the row length in blocks (covering the 4-block loop and its
// tail).
func FuzzDotQ8_0(f *testing.F) {
	f.Add([]byte{5}, bytes.Repeat([]byte{0x80}, 400))
	f.Add([]byte{2}, bytes.Repeat([]byte{0xff, 0x7b, 0x7f, 0x81}, 100))
	f.Fuzz(func(t *testing.T, nb []byte, data []byte) {
		if len(nb) == 0 {
			return
		}
		n := 1 + int(nb[0])%9
		if len(data) < 2*n*BlockBytesQ8_0 {
			return
		}
		w, x := data[:n*BlockBytesQ8_0], data[n*BlockBytesQ8_0:2*n*BlockBytesQ8_0]
		want := dotQ8_0Go(w, x, n)
		if got := dotQ8_0(w, x, n); !blocks.SameFloat(got, want) {
			t.Fatalf("%d blocks: %v (%#08x), Go %v (%#08x)", n, got, math.Float32bits(got), want, math.Float32bits(want))
		}
		if SymmetricQ8_0(x) {
			if got := dotQ8_0Sym(w, x, n); !blocks.SameFloat(got, want) {
				t.Fatalf("%d blocks: sym %v (%#08x), Go %v (%#08x)", n, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	})
}

// FuzzMulQ8_0 cuts arbitrary bytes into weight rows and activation rows
// (the shape from the first bytes, so that panels, pieces and token
// groups come out short) and checks every product of each implementation
// this CPU runs against dotQ8_0Go.
func FuzzMulQ8_0(f *testing.F) {
	f.Add([]byte{17, 5, 2}, bytes.Repeat([]byte{0x80, 0x7b, 0x01}, 2000))
	f.Add([]byte{3, 1, 18}, bytes.Repeat([]byte{0x00, 0x3c, 0x7f, 0x81}, 1000))
	f.Add([]byte{17, 19, 3}, bytes.Repeat([]byte{0x80, 0x7b, 0x01, 0x00, 0x7c}, 2000))
	f.Add([]byte{16, 31, 1}, bytes.Repeat([]byte{0x7f, 0x7b, 0x80, 0x01}, 1000))
	f.Fuzz(func(t *testing.T, shape []byte, data []byte) {
		if len(shape) < 3 {
			return
		}
		// Up to 40 tokens: the AMX kernel takes batches of 16 and more.
		rows, tokens, nb := 1+int(shape[0])%40, 1+int(shape[1])%40, 1+int(shape[2])%(2*panelBlocks+2)
		rb := nb * BlockBytesQ8_0
		if len(data) < (rows+tokens)*rb {
			return
		}
		w, x := data[:rows*rb], data[rows*rb:(rows+tokens)*rb]
		var b Q8_0Batch
		b.Set(x, rb, tokens, nb*BlockQ8_0)
		for set, mul := range mulImpls() {
			out := make([]float32, rows*tokens)
			mul(w, rb, rows, &b, out, rows)
			for ti := range tokens {
				for r := range rows {
					want := dotQ8_0Go(w[r*rb:], x[ti*rb:], nb)
					if got := out[ti*rows+r]; !blocks.SameFloat(got, want) {
						t.Fatalf("%s: %dx%dx%d: row %d token %d: %v (%#08x), Go %v (%#08x)", set, rows, tokens, nb, r, ti, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		}
	})
}

// FuzzDotQ8_0Rows cuts arbitrary bytes into weight rows (padded to a
// stride or not) and one activation row, and checks every row kernel
// this CPU runs against dotQ8_0Go, for any codes (−128 included). The
// shape bytes make row counts below, at and above the AVX-512 kernel's
// chunk of eight (up to two calls of the two-stream kernels), and rows
// of whole groups of eight blocks and tails.
func FuzzDotQ8_0Rows(f *testing.F) {
	f.Add([]byte{5, 17, 3}, bytes.Repeat([]byte{0x80, 0x7b, 0x01}, 2000))
	f.Add([]byte{2, 8, 0}, bytes.Repeat([]byte{0x00, 0x3c, 0x7f, 0x81}, 1000))
	// Ten rows and an activation without -128: the two-stream row kernels
	// of both sets (the AVX2 one takes symmetric activations only).
	f.Add([]byte{9, 8, 1}, bytes.Repeat([]byte{0x00, 0x3c, 0x7f, 0x81}, 1500))
	// Eighteen rows of twelve blocks: two calls of the two-stream kernels,
	// the second forming the first's sums (AVX-512), and block tails.
	f.Add([]byte{17, 11, 0}, bytes.Repeat([]byte{0x00, 0x3c, 0x7f, 0x81}, 2000))
	// Nineteen padded rows of eleven blocks, codes −128 among them: two
	// two-stream calls (the second forming the first's sums) and three
	// rows left over.
	f.Add([]byte{18, 10, 3}, bytes.Repeat([]byte{0x80, 0x3c, 0x01, 0x81}, 2000))
	f.Fuzz(func(t *testing.T, shape []byte, data []byte) {
		if len(shape) < 3 {
			return
		}
		rows, nb, pad := 1+int(shape[0])%19, 1+int(shape[1])%26, int(shape[2])%5
		rb := nb*BlockBytesQ8_0 + pad
		if len(data) < rows*rb+nb*BlockBytesQ8_0 {
			return
		}
		checkRowKernels(t, data[:rows*rb], rb, rows, data[rows*rb:rows*rb+nb*BlockBytesQ8_0], nb)
	})
}
