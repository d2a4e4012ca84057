package quant1bit

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// FuzzDot feeds arbitrary bytes to the dot kernels: the selected kernel
// (assembly on AVX2 machines) and the one for prepared activations must
// agree bit for bit with the Go one. The first byte picks the row length
// in blocks.
func FuzzDot(f *testing.F) {
	f.Add([]byte{1}, bytes.Repeat([]byte{0x80}, 200))
	f.Add([]byte{2}, bytes.Repeat([]byte{0x80, 0x01, 0x7f}, 300))
	f.Add([]byte{3}, bytes.Repeat([]byte{0x3c, 0x00, 0xff, 0x7f}, 300))
	f.Fuzz(func(t *testing.T, nb []byte, data []byte) {
		if len(nb) == 0 {
			return
		}
		for _, k := range []struct {
			dot, ref func([]byte, []byte, int) float32
			acts     func([]byte, *Acts) float32
			block    int
		}{{dotQ1_0, dotQ1_0Go, DotQ1_0Acts, BlockQ1_0}, {dotQ2_0, dotQ2_0Go, DotQ2_0Acts, BlockQ2_0}} {
			n := 1 + int(nb[0])%9
			wb, xb := n*18, n*k.block/32*34
			if len(data) < wb+xb {
				continue
			}
			w, x := data[:wb], data[wb:wb+xb]
			var a Acts
			a.Set(x, n*k.block)
			want := k.ref(w, x, n)
			for name, got := range map[string]float32{"kernel": k.dot(w, x, n), "acts": k.acts(w, &a)} {
				if !blocks.SameFloat(got, want) {
					t.Fatalf("%s, %d blocks of %d: %v (%#08x), Go %v (%#08x)", name, n, k.block, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		}
	})
}

// fuzzBlock reads a block of Q2_0 elements from the first bytes of data,
// or returns nil if data is too short.
func fuzzBlock(data []byte) []float32 {
	if len(data) < 4*BlockQ2_0 {
		return nil
	}
	x := make([]float32, BlockQ2_0)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return x
}

// FuzzQuantizeRowQ2_0 checks that the scale search never does worse than
// the reference encoder on arbitrary finite blocks.
func FuzzQuantizeRowQ2_0(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 64))
	f.Add(bytes.Repeat([]byte{1, 0, 0x80, 0xbf, 0, 0, 0, 0}, 32))
	f.Fuzz(func(t *testing.T, data []byte) {
		x := fuzzBlock(data)
		if x == nil {
			return
		}
		for i := range x {
			if x[i]-x[i] != 0 || math.Abs(float64(x[i])) > 6e4 {
				x[i] = 0 // the comparison below needs finite, fp16-sized values
			}
		}
		got, ref := make([]byte, BlockBytesQ2_0), make([]byte, BlockBytesQ2_0)
		QuantizeRowQ2_0(x, got)
		QuantizeRowQ2_0Ref(x, ref)
		if a, b := rowError(t, x, got), rowError(t, x, ref); a > b*(1+1e-12) {
			t.Fatalf("search error %g above the reference's %g for %v", a, b, x)
		}
	})
}

// FuzzDotQ1_0ActsBatch checks every batch kernel the CPU has (AVX2,
// AVX-VNNI, AVX-512) against the Go kernel on arbitrary bytes: the first
// byte picks the row length in blocks, the second the number of tokens.
func FuzzDotQ1_0ActsBatch(f *testing.F) {
	f.Add([]byte{4, 1}, bytes.Repeat([]byte{0x80, 0x01, 0x7f, 0x3c}, 600))
	f.Add([]byte{5, 2}, bytes.Repeat([]byte{0xff, 0x7b, 0x00, 0x81, 0x55}, 700))
	f.Fuzz(func(t *testing.T, shape []byte, data []byte) {
		if len(shape) < 2 {
			return
		}
		nb, k := 1+int(shape[0])%9, 1+int(shape[1])%6
		wb, xb := nb*BlockBytesQ1_0, nb*BlockQ1_0/blockQ8_0*blockBytesQ8_0
		k = min(k, (len(data)-wb)/xb)
		if k < 1 {
			return
		}
		w := data[:wb]
		acts := make([]Acts, k)
		out := make([]float32, k)
		eachBatchKernel(func(name string) {
			for i := range acts {
				acts[i].Set(data[wb+i*xb:wb+(i+1)*xb], nb*BlockQ1_0)
			}
			DotQ1_0ActsBatch(w, acts, out, 1)
			for i := range acts {
				if want := dotQ1_0Go(w, acts[i].raw, nb); !blocks.SameFloat(out[i], want) {
					t.Fatalf("%s, %d blocks, token %d of %d: %v (%#08x), Go %v (%#08x)", name, nb, i, k, out[i], math.Float32bits(out[i]), want, math.Float32bits(want))
				}
			}
		})
	})
}
