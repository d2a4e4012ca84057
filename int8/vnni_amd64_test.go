//go:build !purego

package int8

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// setVNNIBatchGo is setVNNIBatch from b's int16 codes: its twin, and how
// the tests lay out batches for mulQ8_0AVXVNNI where it is not selected.
func setVNNIBatchGo(b *Q8_0Batch) {
	tp := (b.t + 3) &^ 3
	b.xb = slices.Grow(b.xb[:0], len(b.x))[:len(b.x)]
	b.xc = slices.Grow(b.xc[:0], tp*b.nb)[:tp*b.nb]
	for i := range tp {
		for k := range b.nb {
			var s int32
			xs := b.x[i*b.stride+k*BlockQ8_0 : i*b.stride+(k+1)*BlockQ8_0]
			xb := b.xb[i*b.stride+k*BlockQ8_0 : i*b.stride+(k+1)*BlockQ8_0]
			for j, c := range xs {
				xb[j] = byte(c)
				s += int32(c)
			}
			b.xc[((i/4)*b.nb+k)*4+i%4] = -128 * s
		}
	}
}

// TestSetVNNIBatch checks setVNNIBatch against its twin for token counts
// with and without padding, codes −128 included.
func TestSetVNNIBatch(t *testing.T) {
	if !hasAVXVNNI {
		t.Skip("no AVX-VNNI")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, tokens := range []int{1, 3, 4, 7} {
		const nb = 9
		rb := nb*BlockBytesQ8_0 + 5
		x := make([]byte, tokens*rb)
		for i := range x {
			x[i] = byte(r.Uint32())
		}
		for i := range tokens {
			x[i*rb+2] = 0x80
		}
		var a, b Q8_0Batch
		a.Set(x, rb, tokens, nb*BlockQ8_0)
		b.Set(x, rb, tokens, nb*BlockQ8_0)
		setVNNIBatch(&a, x, rb)
		setVNNIBatchGo(&b)
		for i := range (tokens + 3) &^ 3 {
			row := func(q *Q8_0Batch) []byte { return q.xb[i*q.stride : i*q.stride+nb*BlockQ8_0] }
			if !slices.Equal(row(&a), row(&b)) {
				t.Fatalf("%d tokens: token %d: codes differ", tokens, i)
			}
		}
		if !slices.Equal(a.xc, b.xc) {
			t.Fatalf("%d tokens: corrections %v, Go %v", tokens, a.xc, b.xc)
		}
	}
}
