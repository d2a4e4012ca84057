package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// FuzzDot feeds arbitrary bytes, viewed as F32, F16 and BF16 rows, to the
// selected kernels (assembly on AVX2 machines) and the Go ones: they must
// agree bit for bit, for every length including the tails.
func FuzzDot(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 70))
	f.Add(bytes.Repeat([]byte{0xff, 0x7f, 0x00, 0x80, 0x01, 0x00}, 33))
	// Long enough for three F16 rows of 32 (the rows kernels' assembly).
	f.Add(bytes.Repeat([]byte{0x01, 0x3c, 0xff, 0x7b, 0x00, 0x80, 0x55, 0x03}, 60))
	// Long enough for eleven rows of over 1024 (the four-stream rows
	// kernels, several of the AVX2 one's 256-element turns and a tail).
	f.Add(bytes.Repeat([]byte{0x01, 0x3c, 0xff, 0x7b, 0x00, 0x80, 0x55, 0x03, 0x9a, 0xbc}, 4600))
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
		if got, want := dotF32(a, b), dotF32Go(a, b); !blocks.SameFloat(got, want) {
			t.Fatalf("F32 n=%d: %v, Go %v", n, got, want)
		}
		m := len(data) / 4
		w, x := make([]uint16, m), make([]uint16, m)
		for i := range w {
			w[i] = binary.LittleEndian.Uint16(data[2*i:])
			x[i] = binary.LittleEndian.Uint16(data[2*(m+i):])
		}
		if got, want := dotF16(w, x), dotF16Go(w, x); !blocks.SameFloat(got, want) {
			t.Fatalf("F16 n=%d: %v, Go %v", m, got, want)
		}
		checkF16F32(t, w, x)
		if got, want := dotBF16(w, x), dotBF16Go(w, x); !blocks.SameFloat(got, want) {
			t.Fatalf("BF16 n=%d: %v, Go %v", m, got, want)
		}
		checkBF16F32(t, w, x)
	})
}

// FuzzPanels feeds arbitrary bits to the prompt kernels that lay their
// operands out transposed (DotHeads, MulF16, MulBF16) and checks every output
// against the Go dot products bit for bit. The first bytes choose the
// shape, so that short panels and token groups and the head sizes with
// and without assembly all come up.
func FuzzPanels(f *testing.F) {
	f.Add([]byte{1, 2, 3}, bytes.Repeat([]byte{0x00, 0x80, 0xff, 0x7b, 0x01, 0x3c}, 3000))
	f.Add([]byte{9, 0, 0}, bytes.Repeat([]byte{0x00, 0x00, 0x00, 0x80}, 5000))
	f.Fuzz(func(t *testing.T, shape, data []byte) {
		if len(shape) < 3 {
			return
		}
		sizes := []int{64, 128, 32, 96}
		n := sizes[int(shape[0])%len(sizes)]
		tokens, rows := 1+int(shape[1])%5, 1+int(shape[2])%12
		f32 := func(i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])) }
		if len(data) < 4*(n+tokens*HeadGroup*n) {
			return
		}
		k := make([]float32, n)
		for i := range k {
			k[i] = f32(i)
		}
		q := make([]float32, tokens*HeadGroup*n)
		for i := range q {
			q[i] = f32(n + i)
		}
		qt := make([]float32, len(q))
		TransposeHeads(qt, q, tokens, n, n)
		scores := make([]float32, tokens*HeadGroup)
		DotHeads(k, qt, tokens, scores, HeadGroup)
		for i, got := range scores {
			if want := dotF32Go(k, q[i*n:(i+1)*n]); !blocks.SameFloat(got, want) {
				t.Fatalf("DotHeads n=%d, score %d: %v, Go %v", n, i, got, want)
			}
		}
		if len(data) < 2*rows*n+4*tokens*n {
			return
		}
		w := data[:2*rows*n]
		x := make([]float32, tokens*n)
		for _, f := range formats {
			for i := range x {
				// Activations as the product takes them: binary16 or
				// bfloat16 values.
				x[i] = f.act(binary.LittleEndian.Uint16(data[2*rows*n+2*i:]))
			}
			var b F16Batch
			b.Set(x, n, tokens, n)
			out := make([]float32, tokens*rows)
			f.mul(w, 2*n, rows, &b, out, rows)
			for ti := range tokens {
				for r := range rows {
					want := f.twin(u16View(w[r*2*n:], n), x[ti*n:(ti+1)*n])
					if got := out[ti*rows+r]; !blocks.SameFloat(got, want) {
						t.Fatalf("Mul%s %dx%dx%d: row %d token %d: %v, Go %v", f.name, rows, tokens, n, r, ti, got, want)
					}
				}
			}
		}
	})
}

// FuzzScoreSlots feeds arbitrary bits as keys and queries to every
// DotRowsSlots and DotHeadsSlots kernel this CPU runs and checks them
// against the per-slot Go calls bit for bit. The shape bytes choose the
// head size (with and without assembly), group, tokens, slots and
// strides.
func FuzzScoreSlots(f *testing.F) {
	f.Add([]byte{1, 3, 0, 4, 1}, bytes.Repeat([]byte{0x00, 0x80, 0xff, 0x7f, 0x01, 0x3c, 0x00, 0x00}, 4000))
	f.Add([]byte{0, 7, 2, 0, 0}, bytes.Repeat([]byte{0x00, 0x00, 0x80, 0x7f, 0xaa, 0xbb, 0x80, 0xff}, 4000))
	f.Fuzz(func(t *testing.T, shape, data []byte) {
		if len(shape) < 5 {
			return
		}
		sizes := []int{64, 128, 32, 96, 40}
		d := sizes[int(shape[0])%len(sizes)]
		m, tokens, n := 1+int(shape[1])%8, 1+int(shape[2])%3, 1+int(shape[3])%5
		kstride := d + int(shape[4])%3
		nk, nq := (n-1)*kstride+d, max((tokens-1)*m*d+m*d, tokens*d*HeadGroup)
		if len(data) < 4*(nk+nq) {
			return
		}
		x := make([]float32, nk+nq)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		k, q := x[:nk], x[nk:]
		for _, kern := range scoreSlotKernels {
			checkRowsSlots(t, kern.name, kern.f, n, k, kstride, d, q, m*d, tokens, m, tokens*m+int(shape[4])%2)
		}
		for _, kern := range headSlotKernels {
			checkHeadsSlots(t, kern.name, kern.f, n, k, kstride, d, q, tokens, tokens*HeadGroup+int(shape[4])%2)
		}
	})
}

// FuzzFlashF16 feeds arbitrary bits to FlashF16 (assembly on AVX2
// machines): the cache, queries and running output as binary16 values,
// the running max and sum and the scale as any float32. It must give the
// bits of the calls it replaces. shape chooses the head size (with and
// without assembly), the heads (past one call's eight) and the slots.
func FuzzFlashF16(f *testing.F) {
	f.Add([]byte{1, 3, 9, 0, 0, 0, 0x3e}, bytes.Repeat([]byte{0x00, 0x80, 0xff, 0x7b, 0x01, 0x3c, 0x00, 0xfc, 0x55, 0x03}, 3000))
	f.Add([]byte{0, 9, 2, 0, 0, 0x80, 0x7f}, bytes.Repeat([]byte{0x00, 0x3c, 0x00, 0xbc, 0x00, 0x7e, 0x00, 0x00}, 4000))
	f.Fuzz(func(t *testing.T, shape, data []byte) {
		if len(shape) < 7 {
			return
		}
		sizes := []int{64, 128, 256, 32, 40}
		d := sizes[int(shape[0])%len(sizes)]
		hc, ns := 1+int(shape[1])%12, 1+int(shape[2])%80
		scale := math.Float32frombits(binary.LittleEndian.Uint32(shape[3:]))
		stride := d + 8
		nkv := (ns-1)*stride + d
		if len(data) < 2*(2*nkv+2*hc*d)+8*hc {
			return
		}
		at := 0
		f16s := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = half.F16ToF32(binary.LittleEndian.Uint16(data[at:]))
				at += 2
			}
			return x
		}
		f32s := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[at:]))
				at += 4
			}
			return x
		}
		c := flashCase{k: f16s(nkv), v: f16s(nkv), q: f16s(hc * d), o: f16s(hc * d), m: f32s(hc), sum: f32s(hc), stride: stride, ns: ns, d: d, scale: scale}
		want := c.run(flashCalls)
		for _, k := range flashKernels() {
			if diff := flashDiff(c.run(k.f), want, false); diff != "" {
				t.Fatalf("%s: d=%d, %d heads, %d slots, scale %v: %s", k.name, d, hc, ns, scale, diff)
			}
		}
	})
}
