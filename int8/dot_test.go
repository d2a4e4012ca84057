package int8

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/testkit/blocks"
	"github.com/stretchr/testify/assert"
)

// randomQ8Row returns a Q8_0 row of nb blocks: either the encoding of
// random floats, or random bytes with edge scales and −128 codes
// (blocks.Random).
func randomQ8Row(r *rand.Rand, nb int) []byte {
	if r.IntN(2) != 0 {
		return blocks.Random(r, nb, BlockBytesQ8_0)
	}
	row := make([]byte, nb*BlockBytesQ8_0)
	x := make([]float32, nb*BlockQ8_0)
	s := math.Ldexp(1, r.IntN(30)-20)
	for i := range x {
		x[i] = float32(r.NormFloat64() * s)
	}
	QuantizeRowQ8_0(x, row)
	return row
}

func TestDotQ8_0AsmMatchesGo(t *testing.T) {
	if reflect.ValueOf(dotQ8_0).Pointer() == reflect.ValueOf(dotQ8_0Go).Pointer() {
		t.Skip("no assembly kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 3000 {
		nb := 1 + iter%23
		if iter%97 == 0 {
			nb = 176 // a 5632-element row
		}
		w, x := randomQ8Row(r, nb), randomQ8Row(r, nb)
		got, want := dotQ8_0(w, x, nb), dotQ8_0Go(w, x, nb)
		if !blocks.SameFloat(got, want) {
			t.Fatalf("nb=%d: asm %v (%#08x), Go %v (%#08x)", nb, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

func TestDotQ8_0Extremes(t *testing.T) {
	// All codes −128 against −128 with the largest scale: each block sums
	// to 32·2¹⁴ exactly, which a kernel with int8 sign tricks gets wrong.
	nb := 5
	w := make([]byte, nb*BlockBytesQ8_0)
	for b := range nb {
		binary.LittleEndian.PutUint16(w[b*BlockBytesQ8_0:], 0x7bff)
		for j := 2; j < BlockBytesQ8_0; j++ {
			w[b*BlockBytesQ8_0+j] = 0x80
		}
	}
	want := 5 * 65504.0 * 65504 * 524288
	for _, got := range []float32{DotQ8_0(w, w, nb*BlockQ8_0), dotQ8_0Go(w, w, nb)} {
		if math.Abs(float64(got)-want) > want*1e-7 {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	// A single block: d=1, codes −128·−128·32 = 524288 exactly.
	binary.LittleEndian.PutUint16(w, 0x3c00)
	if got := DotQ8_0(w, w, BlockQ8_0); got != 524288 {
		t.Errorf("got %v, want 524288", got)
	}
}

// TestDotQ8_0Value checks the kernel against a float64 dot product of the
// rows decoded by gguf.Dequantize.
func TestDotQ8_0Value(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const n = 2048
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	w, x := make([]byte, n/32*34), make([]byte, n/32*34)
	QuantizeRowQ8_0(a, w)
	QuantizeRowQ8_0(b, x)
	want, mag := blocks.Dot(t, gguf.Q8_0, w, gguf.Q8_0, x, n)
	for _, f := range []func([]byte, []byte, int) float32{dotQ8_0Go, dotQ8_0} {
		if got := float64(f(w, x, n/32)); math.Abs(got-want) > 1e-6*mag {
			t.Errorf("got %v, want %v", got, want)
		}
	}
}

func TestDotQ8_0Checks(t *testing.T) {
	if got := DotQ8_0(nil, nil, 0); got != 0 {
		t.Errorf("empty: %v", got)
	}
	assert.Panics(t, func() { DotQ8_0(make([]byte, 34), make([]byte, 34), 16) }, "n not a multiple of 32")
	assert.Panics(t, func() { DotQ8_0(make([]byte, 34), make([]byte, 67), 64) }, "x too short")
}

// symmetric replaces the −128 codes of the Q8_0 row x by −127.
func symmetric(x []byte) []byte {
	for b := 0; b < len(x); b += BlockBytesQ8_0 {
		for j := b + 2; j < b+BlockBytesQ8_0; j++ {
			if x[j] == 0x80 {
				x[j] = 0x81
			}
		}
	}
	return x
}

func TestDotQ8_0SymMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := range 3000 {
		nb := 1 + iter%23
		if iter%97 == 0 {
			nb = 176
		}
		// w keeps its −128 codes: only x must avoid them.
		w, x := randomQ8Row(r, nb), symmetric(randomQ8Row(r, nb))
		if !SymmetricQ8_0(x) {
			t.Fatal("SymmetricQ8_0 = false for a row without −128")
		}
		got, want := DotQ8_0Sym(w, x, nb*BlockQ8_0), dotQ8_0Go(w, x, nb)
		if !blocks.SameFloat(got, want) {
			t.Fatalf("nb=%d: sym %v (%#08x), Go %v (%#08x)", nb, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

func TestDotQ8_0SymExtremes(t *testing.T) {
	// Weights all −128, activations all −127 then all 127, largest
	// scales: the int16 pair sums reach ±2·128·127 without saturating.
	nb := 5
	w, x := make([]byte, nb*BlockBytesQ8_0), make([]byte, nb*BlockBytesQ8_0)
	for _, c := range []byte{0x81, 0x7f} {
		for b := range nb {
			binary.LittleEndian.PutUint16(w[b*BlockBytesQ8_0:], 0x3c00)
			binary.LittleEndian.PutUint16(x[b*BlockBytesQ8_0:], 0x3c00)
			for j := 2; j < BlockBytesQ8_0; j++ {
				w[b*BlockBytesQ8_0+j], x[b*BlockBytesQ8_0+j] = 0x80, c
			}
		}
		want := float32(nb * 32 * -128 * int(int8(c)))
		if got := DotQ8_0Sym(w, x, nb*BlockQ8_0); got != want {
			t.Errorf("codes −128·%d: got %v, want %v", int8(c), got, want)
		}
	}
	if SymmetricQ8_0(w) {
		t.Error("SymmetricQ8_0 = true for a row of −128 codes")
	}
}

// TestQuantizeRowQ8_0Symmetric checks that QuantizeRowQ8_0 never makes the
// code −128 from finite input, which DotQ8_0Sym relies on.
func TestQuantizeRowQ8_0Symmetric(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	x := make([]float32, 64*BlockQ8_0)
	y := make([]byte, 64*BlockBytesQ8_0)
	for iter := range 200 {
		s := math.Ldexp(1, r.IntN(80)-40)
		for i := range x {
			x[i] = float32(r.NormFloat64() * s)
			if iter%2 == 0 && r.IntN(16) == 0 {
				x[i] = -x[i] * 1e3 // a dominant negative element
			}
		}
		QuantizeRowQ8_0(x, y)
		if !SymmetricQ8_0(y) {
			t.Fatalf("iteration %d: QuantizeRowQ8_0 made a −128 code", iter)
		}
	}
}

// TestDotQ8_0SymRows checks the many-rows form against single dots,
// with rows padded (rowBytes above the row length) or not, and its checks.
func TestDotQ8_0SymRows(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for iter := range 200 {
		nb, rows, pad := 1+iter%9, 1+iter%6, (iter/2%2)*7
		rowBytes := nb*BlockBytesQ8_0 + pad
		var w []byte
		for range rows {
			w = append(w, randomQ8Row(r, nb)...)
			w = append(w, make([]byte, pad)...)
		}
		w = w[:len(w)-pad]
		x := symmetric(randomQ8Row(r, nb))
		out := make([]float32, rows)
		DotQ8_0SymRows(w, rowBytes, x, nb*BlockQ8_0, out)
		for i, got := range out {
			if want := DotQ8_0Sym(w[i*rowBytes:], x, nb*BlockQ8_0); !blocks.SameFloat(got, want) {
				t.Fatalf("iter %d row %d: %v, single %v", iter, i, got, want)
			}
		}
	}
	w := randomQ8Row(r, 4) // two rows of 2 blocks
	x := symmetric(randomQ8Row(r, 2))
	assert.Panics(t, func() { DotQ8_0SymRows(w, 2*BlockBytesQ8_0, x, 64, make([]float32, 3)) }, "short w")
	assert.Panics(t, func() { DotQ8_0SymRows(w, BlockBytesQ8_0, x, 64, make([]float32, 2)) }, "short row")
	assert.Panics(t, func() { DotQ8_0SymRows(w, 2*BlockBytesQ8_0, x[:40], 64, make([]float32, 2)) }, "short x")
	assert.Panics(t, func() { DotQ8_0SymRows(w, -1, x, 64, make([]float32, 2)) }, "negative stride")
}

// TestRowKernelsMatchGo checks every row kernel this CPU runs against
// the Go twin on random rows (codes −128 and edge scales included), with
// row counts below, at and above eight (the AVX-512 kernel's chunk), up
// to five two-stream calls (each forming the sums of the one before),
// and lengths in whole groups of eight blocks and with tails.
func TestRowKernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for iter := range 400 {
		nb, rows := 1+iter%27, 1+iter%43
		if iter%50 == 0 {
			nb = 176 // a 5632-element row
		}
		rb := nb * BlockBytesQ8_0
		var w []byte
		for range rows {
			w = append(w, randomQ8Row(r, nb)...)
		}
		x := randomQ8Row(r, nb)
		if iter%2 == 1 {
			x = symmetric(x) // for the AVX2 kernel too
		}
		checkRowKernels(t, w, rb, rows, x, nb)
	}
}

// TestRowKernelsStreams checks the row kernels on every row count up to
// 40 and on counts around multiples of eight past it (the two-stream
// kernels take halves of a multiple of four, four rows of each per call,
// and the rest apart), rows padded to a stride or not, of lengths with
// and without a tail of blocks past the groups of eight.
func TestRowKernelsStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	counts := []int{}
	for rows := 1; rows <= 40; rows++ {
		counts = append(counts, rows)
	}
	counts = append(counts, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 136, 141)
	for i, rows := range counts {
		nb := []int{1, 7, 8, 13, 16, 45, 181}[i%7]
		pad := i / 7 % 2 * 5
		rb := nb*BlockBytesQ8_0 + pad
		w := make([]byte, 0, rows*rb)
		for range rows {
			w = append(w, randomQ8Row(r, nb)...)
			w = append(w, make([]byte, pad)...)
		}
		x := randomQ8Row(r, nb)
		if i%3 == 0 {
			x = symmetric(x) // for the AVX2 kernel too
		}
		checkRowKernels(t, w[:rows*rb-pad], rb, rows, x, nb)
	}
}

// symOnly reports whether the decoding kernels of set take symmetric
// activations only (the AVX2 and AVX-VNNI ones).
func symOnly(set string) bool { return strings.HasPrefix(set, "avx2") }

// checkRowKernels checks every row kernel this CPU runs on rows weight
// rows, rb bytes apart, against dotQ8_0Go (the AVX2 kernels only when x
// is symmetric).
func checkRowKernels(t *testing.T, w []byte, rb, rows int, x []byte, nb int) {
	t.Helper()
	for set, f := range rowsImpls() {
		if symOnly(set) && !SymmetricQ8_0(x) {
			continue
		}
		out := make([]float32, rows)
		f(w, rb, x, nb, out)
		for r, got := range out {
			if want := dotQ8_0Go(w[r*rb:], x, nb); !blocks.SameFloat(got, want) {
				t.Fatalf("%s: %d rows of %d blocks, %d bytes apart: row %d: %v (%#08x), Go %v (%#08x)", set, rows, nb, rb, r, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
}
