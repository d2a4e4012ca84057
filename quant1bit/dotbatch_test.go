package quant1bit

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
	"github.com/stretchr/testify/assert"
)

// batchCase makes a weight row of nb Q1_0 blocks and k activation rows,
// in one of several styles: random bytes with edge scales, realistic
// values, or extremes (largest fp16 scales, codes ±127 and −128, zero
// scales). It reuses the activation rows in reuse when there are enough.
func batchCase(r *rand.Rand, nb, k, style int, reuse []Acts) (w []byte, acts []Acts) {
	n := nb * BlockQ1_0
	if len(reuse) >= k {
		acts = reuse[:k]
	} else {
		acts = make([]Acts, k)
	}
	switch style {
	case 0:
		w = blocks.Random(r, nb, BlockBytesQ1_0)
	case 1:
		w, _ = realistic(r, n, QuantizeRowQ1_0, nb*BlockBytesQ1_0)
	default:
		w = blocks.Random(r, nb, BlockBytesQ1_0)
		for b := range nb {
			h := [...]uint16{0x7bff, 0xfbff, 0, 0x8000, 0x3c00}[r.IntN(5)]
			binary.LittleEndian.PutUint16(w[b*BlockBytesQ1_0:], h)
		}
	}
	for t := range acts {
		var x []byte
		switch style {
		case 0:
			x = blocks.Random(r, n/blockQ8_0, blockBytesQ8_0)
		case 1:
			_, x = realistic(r, n, QuantizeRowQ1_0, nb*BlockBytesQ1_0)
		default:
			x = blocks.Random(r, n/blockQ8_0, blockBytesQ8_0)
			for b := range n / blockQ8_0 {
				blk := x[b*blockBytesQ8_0 : (b+1)*blockBytesQ8_0]
				h := [...]uint16{0x7bff, 0xfbff, 0, 0x3c00, 0x0001}[r.IntN(5)]
				binary.LittleEndian.PutUint16(blk, h)
				c := [...]byte{0x7f, 0x81, 0x80}[r.IntN(3)]
				for j := 2; j < blockBytesQ8_0; j++ {
					if r.IntN(4) != 0 {
						blk[j] = c
					}
				}
			}
		}
		acts[t].Set(x, n)
	}
	return w, acts
}

func checkBatch(t *testing.T, what string, w []byte, acts []Acts, stride int) {
	t.Helper()
	out := make([]float32, (len(acts)-1)*stride+1+stride)
	for i := range out {
		out[i] = 42
	}
	DotQ1_0ActsBatch(w, acts, out, stride)
	for i := range acts {
		want := dotQ1_0Go(w, acts[i].raw, acts[i].n/BlockQ1_0)
		if got := out[i*stride]; !blocks.SameFloat(got, want) {
			t.Fatalf("%s, token %d of %d: batch %v (%#08x), Go %v (%#08x)", what, i, len(acts), got, math.Float32bits(got), want, math.Float32bits(want))
		}
		for j := i*stride + 1; j < (i+1)*stride; j++ {
			if out[j] != 42 {
				t.Fatalf("%s: out[%d] written between results", what, j)
			}
		}
	}
	if len(acts) > 0 && out[len(acts)*stride] != 42 {
		t.Fatalf("%s: wrote past the last result", what)
	}
}

func TestDotQ1_0ActsBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	widths := []int{128, 256, 384, 640, 896, 2048, 2176, 5632}
	reuse := make([]Acts, 9) // rows Set again at other lengths
	for iter := range 1500 {
		nb := 1 + iter%11
		if iter%5 == 0 {
			nb = widths[(iter/5)%len(widths)] / BlockQ1_0
		}
		k := 1 + iter%9
		style := iter % 3
		w, acts := batchCase(r, nb, k, style, reuse)
		checkBatch(t, "random", w, acts, 1+iter%3)
	}
}

// uniformBlocks returns nb blocks of blockBytes bytes, each the fp16
// scale followed by fill in all its other bytes.
func uniformBlocks(nb, blockBytes int, scale uint16, fill byte) []byte {
	var b []byte
	for range nb {
		b = binary.LittleEndian.AppendUint16(b, scale)
		b = append(b, bytes.Repeat([]byte{fill}, blockBytes-2)...)
	}
	return b
}

// specialActs returns activation rows of n elements made entirely of
// extreme values: scales 0, ±65504 and 1, codes ±127, −128 and 0.
func specialActs(n int) []Acts {
	var acts []Acts
	for _, xs := range []uint16{0, 0x7bff, 0xfbff, 0x3c00} {
		for _, c := range []byte{0x7f, 0x81, 0x80, 0} {
			acts = append(acts, Acts{})
			acts[len(acts)-1].Set(uniformBlocks(n/blockQ8_0, blockBytesQ8_0, xs, c), n)
		}
	}
	return acts
}

// TestDotQ1_0ActsBatchSpecial covers rows made entirely of the extreme
// values, where lanes overflow to ±Inf or NaN or stay zero.
func TestDotQ1_0ActsBatchSpecial(t *testing.T) {
	for _, nb := range []int{1, 2, 3, 16, 44} {
		acts := specialActs(nb * BlockQ1_0)
		for _, ws := range []uint16{0, 0x8000, 0x7bff, 0xfbff, 0x7c00, 0x7e00} {
			for _, bits := range []byte{0, 0xff, 0x5a} {
				w := uniformBlocks(nb, BlockBytesQ1_0, ws, bits)
				checkBatch(t, "special", w, acts, 1)
			}
		}
	}
}

func TestDotQ1_0ActsBatchChecks(t *testing.T) {
	DotQ1_0ActsBatch(nil, nil, nil, 0) // no rows: nothing to do
	var empty [3]Acts
	out := []float32{1, 2, 3}
	DotQ1_0ActsBatch(nil, empty[:], out, 1)
	if out[0] != 0 || out[1] != 0 || out[2] != 0 {
		t.Errorf("empty rows must give 0, got %v", out)
	}
	r := rand.New(rand.NewPCG(1, 2))
	w, acts := batchCase(r, 2, 3, 1, nil)
	var other Acts
	other.Set(make([]byte, 4*blockBytesQ8_0), 4*blockQ8_0)
	for name, f := range map[string]func(){
		"short w":     func() { DotQ1_0ActsBatch(w[:35], acts, make([]float32, 3), 1) },
		"short out":   func() { DotQ1_0ActsBatch(w, acts, make([]float32, 2), 1) },
		"short out 2": func() { DotQ1_0ActsBatch(w, acts, make([]float32, 4), 2) },
		"stride 0":    func() { DotQ1_0ActsBatch(w, acts, make([]float32, 3), 0) },
		"mixed Len":   func() { DotQ1_0ActsBatch(w, append(acts[:2:2], other), make([]float32, 3), 1) },
	} {
		assert.Panics(t, f, name)
	}
	DotQ1_0ActsBatch(w, acts, make([]float32, 5), 2) // exactly fits
}

// TestPackWords compares the batch kernels' layouts (pairs of Q1_0
// blocks for AVX2 and AVX-VNNI, quads for AVX-512) made at init's choice
// with the Go reference, for block counts that fill groups exactly and
// that pad them.
func TestPackWords(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		n    int
		sign int32
	}{{8, 1}, {16, -1}} {
		for _, nb := range []int{1, 2, 3, 8, 16, 17, 44} {
			_, acts := batchCase(r, nb, 1, 0, nil)
			a := &acts[0]
			groups := len(a.d) / c.n
			want := make([]byte, groups*40*c.n)
			packWordsGo(want, a.codes, a.d, a.sum, groups, c.n, c.sign)
			got := make([]byte, len(want))
			packWords(got, a.codes, a.d, a.sum, groups, c.n, c.sign)
			if string(got) != string(want) {
				t.Fatalf("groups of %d, %d blocks: packed layouts differ", c.n, nb)
			}
			if c.n != 8 {
				continue
			}
			packBytesGo(want, a.codes, a.d, a.sum, groups)
			packBytes(got, a.codes, a.d, a.sum, groups)
			if string(got) != string(want) {
				t.Fatalf("%d blocks: byte-transposed layouts differ", nb)
			}
		}
	}
}

// TestDotQ1_0ActsRows checks the many-rows form against single dots for
// 1-9 tokens, odd and even block counts and padded rows (rowBytes larger
// than the row), and that nothing outside the results is written.
func TestDotQ1_0ActsRows(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for iter := range 300 {
		nb := 1 + iter%7
		k := 1 + iter%9
		rows := 1 + iter%5
		pad := (iter / 3 % 2) * 5
		rowBytes := nb*BlockBytesQ1_0 + pad
		w := make([]byte, 0, rows*rowBytes)
		var acts []Acts
		for range rows {
			var row []byte
			row, acts = batchCase(r, nb, k, iter%3, acts)
			w = append(w, row...)
			w = append(w, make([]byte, pad)...)
		}
		w = w[:(rows-1)*rowBytes+nb*BlockBytesQ1_0] // the last row unpadded
		stride := rows + iter%2
		out := make([]float32, (k-1)*stride+rows+1)
		for i := range out {
			out[i] = 42
		}
		DotQ1_0ActsRows(w, rowBytes, rows, acts, out, stride)
		for ti := range acts {
			for ri := range rows {
				want := dotQ1_0Go(w[ri*rowBytes:ri*rowBytes+nb*BlockBytesQ1_0], acts[ti].raw, nb)
				if got := out[ti*stride+ri]; !blocks.SameFloat(got, want) {
					t.Fatalf("iter %d: row %d token %d: %v, Go %v", iter, ri, ti, got, want)
				}
			}
			for j := ti*stride + rows; j < min((ti+1)*stride, len(out)); j++ {
				if out[j] != 42 {
					t.Fatalf("iter %d: out[%d] written", iter, j)
				}
			}
		}
	}
	w, acts := batchCase(r, 2, 2, 0, nil) // rows of 2 blocks
	two := 2 * BlockBytesQ1_0
	w2 := append(append([]byte(nil), w...), w...)
	for name, f := range map[string]func(){
		"short out": func() { DotQ1_0ActsRows(w2, two, 2, acts, make([]float32, 3), 2) },
		"stride":    func() { DotQ1_0ActsRows(w2, two, 2, acts, make([]float32, 8), 1) },
		"short w":   func() { DotQ1_0ActsRows(w, two, 2, acts, make([]float32, 8), 2) },
		"short row": func() { DotQ1_0ActsRows(w2, BlockBytesQ1_0, 2, acts, make([]float32, 8), 2) },
		"negative":  func() { DotQ1_0ActsRows(w2, two, -1, acts, make([]float32, 8), 2) },
	} {
		assert.Panics(t, f, name)
	}
}
