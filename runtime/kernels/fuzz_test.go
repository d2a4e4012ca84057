package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// FuzzDot feeds arbitrary bytes, viewed as F32, F16 and BF16 rows, to the
// selected kernels (assembly on AVX2 machines) and the Go ones: they must
// agree bit for bit, for every length including the tails.
func FuzzDot(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 70))
	f.Add(bytes.Repeat([]byte{0xff, 0x7f, 0x00, 0x80, 0x01, 0x00}, 33))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := len(data) / 8
		if n == 0 {
			return
		}
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			b[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*(n+i):]))
		}
		if got, want := dotF32(a, b), dotF32Go(a, b); !sameFloat(got, want) {
			t.Fatalf("F32 n=%d: %v, Go %v", n, got, want)
		}
		m := len(data) / 4
		w, x := make([]uint16, m), make([]uint16, m)
		for i := range w {
			w[i] = binary.LittleEndian.Uint16(data[2*i:])
			x[i] = binary.LittleEndian.Uint16(data[2*(m+i):])
		}
		if got, want := dotF16(w, x), dotF16Go(w, x); !sameFloat(got, want) {
			t.Fatalf("F16 n=%d: %v, Go %v", m, got, want)
		}
		checkF16F32(t, w, x)
		if got, want := dotBF16(w, x), dotBF16Go(w, x); !sameFloat(got, want) {
			t.Fatalf("BF16 n=%d: %v, Go %v", m, got, want)
		}
	})
}
