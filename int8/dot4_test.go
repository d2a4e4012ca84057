package int8

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// symRow is randomQ8Row with every −128 code made −127, as the Sym
// kernels require of activations.
func symRow(r *rand.Rand, nb int) []byte {
	x := randomQ8Row(r, nb)
	for b := 0; b < nb; b++ {
		for j := 2; j < BlockBytesQ8_0; j++ {
			if i := b*BlockBytesQ8_0 + j; x[i] == 0x80 {
				x[i] = 0x81
			}
		}
	}
	return x
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

func TestDot4MatchesSingle(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := range 2000 {
		nb := 1 + iter%19
		if iter%101 == 0 {
			nb = 176 // a 5632-element row
		}
		n := nb * BlockQ8_0
		rb := nb * BlockBytesQ8_0
		stride := rb + r.IntN(3)*BlockBytesQ8_0 + r.IntN(5)

		w := randomQ8Row(r, nb)
		xs := [][]byte{symRow(r, nb), symRow(r, nb), symRow(r, nb), symRow(r, nb)}
		var got [4]float32
		DotQ8_0SymTokens4(w, rowsAt(r, xs, stride), stride, n, &got)
		for i := range got {
			if want := DotQ8_0Sym(w, xs[i], n); !sameFloat(got[i], want) {
				t.Fatalf("Tokens4 nb=%d lane %d: %v (%#08x), single %v (%#08x)", nb, i, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
			}
			// The asm single dot is itself checked against the Go
			// reference; check the lane against it too.
			if want := dotQ8_0Go(w, xs[i], nb); !sameFloat(got[i], want) {
				t.Fatalf("Tokens4 nb=%d lane %d: %v, Go reference %v", nb, i, got[i], want)
			}
		}

		xs8 := append(xs, symRow(r, nb), symRow(r, nb), symRow(r, nb), symRow(r, nb))
		x8 := rowsAt(r, xs8, stride)
		xd := make([]float32, 8*nb)
		Q8_0Scales8(x8, stride, nb, xd)
		var got8 [8]float32
		DotQ8_0SymTokens8(w, x8, stride, xd, n, &got8)
		for i := range got8 {
			if want := dotQ8_0Go(w, xs8[i], nb); !sameFloat(got8[i], want) {
				t.Fatalf("Tokens8 nb=%d lane %d: %v (%#08x), Go reference %v (%#08x)", nb, i, got8[i], math.Float32bits(got8[i]), want, math.Float32bits(want))
			}
		}
		// The same rows cut at a random block and summed in two calls.
		cut := r.IntN(nb + 1)
		w1, w2 := w[:cut*BlockBytesQ8_0], w[cut*BlockBytesQ8_0:]
		x1, x2 := x8, x8[cut*BlockBytesQ8_0:]
		var acc [8]float32
		DotQ8_0SymTokens8Add(w1, x1, stride, xd[:8*cut], cut*BlockQ8_0, &acc)
		DotQ8_0SymTokens8Add(w2, x2, stride, xd[8*cut:], (nb-cut)*BlockQ8_0, &acc)
		for i := range acc {
			if !sameFloat(acc[i], got8[i]) {
				t.Fatalf("Tokens8Add cut %d of %d lane %d: %v, whole %v", cut, nb, i, acc[i], got8[i])
			}
		}
	}
}

func TestDot4BadLengths(t *testing.T) {
	w, x := make([]byte, 4*34), make([]byte, 4*34)
	var out [4]float32
	for name, f := range map[string]func(){
		"not a block multiple": func() { DotQ8_0SymTokens4(w, x, 34, 33, &out) },
		"x too short":          func() { DotQ8_0SymTokens4(w, x[:3*34], 34, 32, &out) },
		"stride below a row":   func() { DotQ8_0SymTokens4(w, x, 17, 32, &out) },
		"w too short":          func() { DotQ8_0SymTokens4(w[:33], x, 34, 32, &out) },
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

// BenchmarkDot4 compares four dot products in one pass with four single
// calls (weights per second counts every row·token pair).
func BenchmarkDot4(b *testing.B) {
	for _, n := range []int{2048, 5632} {
		nb := n / BlockQ8_0
		rb := nb * BlockBytesQ8_0
		w := make([]byte, 4*rb)
		x := make([]byte, 4*rb)
		for i := 0; i < 4; i++ {
			wr, xr := benchRows(n)
			copy(w[i*rb:], wr)
			copy(x[i*rb:], xr)
		}
		var out [4]float32
		report := func(b *testing.B) {
			b.ReportMetric(4*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
		}
		b.Run(strconv.Itoa(n)+"/tokens4", func(b *testing.B) {
			cpuBench(b, 4*n, func() { DotQ8_0SymTokens4(w[:rb], x, rb, n, &out) })
			report(b)
		})
		x8 := make([]byte, 8*rb)
		for i := 0; i < 8; i++ {
			_, xr := benchRows(n)
			copy(x8[i*rb:], xr)
		}
		xd := make([]float32, 8*nb)
		Q8_0Scales8(x8, rb, nb, xd)
		var out8 [8]float32
		b.Run(strconv.Itoa(n)+"/tokens8", func(b *testing.B) {
			cpuBench(b, 8*n, func() { DotQ8_0SymTokens8(w[:rb], x8, rb, xd, n, &out8) })
			b.ReportMetric(8*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
		})
		b.Run(strconv.Itoa(n)+"/single4", func(b *testing.B) {
			cpuBench(b, 4*n, func() {
				for i := range out {
					out[i] = DotQ8_0Sym(w[:rb], x[i*rb:], n)
				}
			})
			report(b)
		})
	}
}
