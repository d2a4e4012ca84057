package int8

import (
	"bytes"
	"math"
	"testing"
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
		if got := dotQ8_0(w, x, n); !sameFloat(got, want) {
			t.Fatalf("%d blocks: %v (%#08x), Go %v (%#08x)", n, got, math.Float32bits(got), want, math.Float32bits(want))
		}
		if SymmetricQ8_0(x) {
			if got := dotQ8_0Sym(w, x, n); !sameFloat(got, want) {
				t.Fatalf("%d blocks: sym %v (%#08x), Go %v (%#08x)", n, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	})
}
