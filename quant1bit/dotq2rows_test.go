package quant1bit

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
	"github.com/stretchr/testify/assert"
)

// q2Row makes a Q2_0 weight row of nb blocks in one of batchCase's
// styles: random bytes, realistic values, or extreme scales.
func q2Row(r *rand.Rand, nb, style int) []byte {
	switch style {
	case 0:
		return blocks.Random(r, nb, BlockBytesQ2_0)
	case 1:
		w, _ := realistic(r, nb*BlockQ2_0, QuantizeRowQ2_0Ref, nb*BlockBytesQ2_0)
		return w
	}
	w := blocks.Random(r, nb, BlockBytesQ2_0)
	for b := range nb {
		h := [...]uint16{0x7bff, 0xfbff, 0, 0x8000, 0x3c00}[r.IntN(5)]
		binary.LittleEndian.PutUint16(w[b*BlockBytesQ2_0:], h)
	}
	return w
}

// checkQ2Rows runs DotQ2_0ActsRows on rows rows of nb blocks (rowBytes
// apart) and compares every result with dotQ2_0Go, and that nothing
// outside the results is written.
func checkQ2Rows(t *testing.T, what string, w []byte, rowBytes, rows int, acts []Acts, stride int) {
	t.Helper()
	nb := acts[0].n / BlockQ2_0
	out := make([]float32, (len(acts)-1)*stride+rows+1)
	for i := range out {
		out[i] = 42
	}
	DotQ2_0ActsRows(w, rowBytes, rows, acts, out, stride)
	for ti := range acts {
		for ri := range rows {
			want := dotQ2_0Go(w[ri*rowBytes:], acts[ti].raw, nb)
			if got := out[ti*stride+ri]; !blocks.SameFloat(got, want) {
				t.Fatalf("%s, %d blocks: row %d token %d of %d: %v (%#08x), Go %v (%#08x)",
					what, nb, ri, ti, len(acts), got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
		for j := ti*stride + rows; j < min((ti+1)*stride, len(out)); j++ {
			if out[j] != 42 {
				t.Fatalf("%s: out[%d] written", what, j)
			}
		}
	}
	if out[len(out)-1] != 42 {
		t.Fatalf("%s: wrote past the last result", what)
	}
}

// TestDotQ2_0ActsRows checks the rows kernel against the Go dot for 1-9
// tokens, whole steps of eight blocks (the AVX-512 kernel) and other
// block counts, padded rows and strides.
func TestDotQ2_0ActsRows(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	widths := []int{512, 1024, 2560, 5120} // whole steps
	reuse := make([]Acts, 9)
	for iter := range 600 {
		nb := 8 * (1 + iter%4)
		switch iter % 4 {
		case 1:
			nb = widths[(iter/4)%len(widths)] / BlockQ2_0
		case 3:
			nb = 1 + iter%13
		}
		k := 1 + iter%9
		rows := 1 + iter%5
		pad := (iter / 3 % 2) * 7
		style := iter % 3
		rowBytes := nb*BlockBytesQ2_0 + pad
		var w []byte
		for range rows {
			w = append(w, q2Row(r, nb, style)...)
			w = append(w, q2Row(r, 1, 0)[:pad]...)
		}
		w = w[:(rows-1)*rowBytes+nb*BlockBytesQ2_0] // the last row unpadded
		acts := reuse[:k]
		_, actsQ1 := batchCase(r, nb/2+1, k, style, nil) // Q8_0 rows in the same styles
		for i := range acts {
			acts[i].Set(actsQ1[i].raw[:nb*BlockQ2_0/blockQ8_0*blockBytesQ8_0], nb*BlockQ2_0)
		}
		checkQ2Rows(t, "iter "+strconv.Itoa(iter), w, rowBytes, rows, acts, rows+iter%2)
	}
}

// TestDotQ2_0ActsRowsSpecial covers rows made entirely of extreme values:
// lanes that overflow to ±Inf or NaN or stay zero, codes 0 and 3, and
// activation codes ±127 and −128.
func TestDotQ2_0ActsRowsSpecial(t *testing.T) {
	for _, nb := range []int{8, 16, 40, 3} {
		acts := specialActs(nb * BlockQ2_0)
		var w []byte
		for _, ws := range []uint16{0, 0x8000, 0x7bff, 0xfbff, 0x7c00, 0x7e00} {
			for _, codes := range []byte{0, 0xff, 0x55, 0xaa, 0x1b} {
				w = append(w, uniformBlocks(nb, BlockBytesQ2_0, ws, codes)...)
			}
		}
		rb := nb * BlockBytesQ2_0
		checkQ2Rows(t, "special", w, rb, len(w)/rb, acts, len(w)/rb)
	}
}

// TestDotQ2_0ActsRowsShared has goroutines share Acts fresh from Set, as
// the runtime's matmul threads do, each with its own rows: their first
// calls race to fill the AVX2 kernels' layout (see Acts.q2Ready; run
// with -race), with init's kernel and each AVX2-layout one.
func TestDotQ2_0ActsRowsShared(t *testing.T) {
	const nb, rows, k, workers = 40, 64, 3, 4
	r := rand.New(rand.NewPCG(53, 54))
	rb := nb * BlockBytesQ2_0
	var w []byte
	for range rows {
		w = append(w, q2Row(r, nb, 1)...)
	}
	_, q := batchCase(r, nb/2, k, 1, nil)
	acts := make([]Acts, k)
	check := func(name string) {
		for i := range acts {
			acts[i].Set(q[i].raw, nb*BlockQ2_0)
		}
		out := make([]float32, k*rows)
		var wg sync.WaitGroup
		for g := range workers {
			r0, r1 := rows*g/workers, rows*(g+1)/workers
			wg.Go(func() { DotQ2_0ActsRows(w[r0*rb:], rb, r1-r0, acts, out[r0:], rows) })
		}
		wg.Wait()
		for ti := range acts {
			for ri := range rows {
				want := dotQ2_0Go(w[ri*rb:], acts[ti].raw, nb)
				if got := out[ti*rows+ri]; !blocks.SameFloat(got, want) {
					t.Fatalf("%s: row %d token %d: %v, Go %v", name, ri, ti, got, want)
				}
			}
		}
	}
	check(kernelSet)
	eachQ2RowsKernel(check)
}

func TestDotQ2_0ActsRowsChecks(t *testing.T) {
	DotQ2_0ActsRows(nil, 0, 3, nil, nil, 0) // no tokens: nothing to do
	var empty [2]Acts
	out := []float32{1, 2, 3, 4}
	DotQ2_0ActsRows(nil, 0, 2, empty[:], out, 2)
	assert.Equal(t, []float32{0, 0, 0, 0}, out, "empty rows give 0")
	r := rand.New(rand.NewPCG(1, 2))
	two := 2 * BlockBytesQ2_0
	w2 := append(q2Row(r, 2, 0), q2Row(r, 2, 0)...)
	acts := make([]Acts, 2)
	for i := range acts {
		acts[i].Set(blocks.Random(r, 4, blockBytesQ8_0), 4*blockQ8_0)
	}
	var other Acts
	other.Set(make([]byte, 2*blockBytesQ8_0), 2*blockQ8_0)
	for name, f := range map[string]func(){
		"short out": func() { DotQ2_0ActsRows(w2, two, 2, acts, make([]float32, 3), 2) },
		"stride":    func() { DotQ2_0ActsRows(w2, two, 2, acts, make([]float32, 8), 1) },
		"short w":   func() { DotQ2_0ActsRows(w2[:two], two, 2, acts, make([]float32, 8), 2) },
		"short row": func() { DotQ2_0ActsRows(w2, BlockBytesQ2_0, 2, acts, make([]float32, 8), 2) },
		"negative":  func() { DotQ2_0ActsRows(w2, two, -1, acts, make([]float32, 8), 2) },
		"mixed Len": func() { DotQ2_0ActsRows(w2, two, 2, []Acts{acts[0], other}, make([]float32, 8), 2) },
	} {
		assert.Panics(t, f, name)
	}
	DotQ2_0ActsRows(w2, two, 2, acts, make([]float32, 4), 2) // exactly fits
}

// FuzzDotQ2_0ActsRows checks the rows kernel init chose (AVX-512 where
// the CPU has it), then each AVX2-layout one the CPU has (AVX2, AVX-VNNI
// VEX and EVEX), against the Go dot on arbitrary bytes: the shape bytes
// pick the row length in blocks (whole steps of eight mostly), the
// tokens and the rows.
func FuzzDotQ2_0ActsRows(f *testing.F) {
	f.Add([]byte{0, 1, 2}, bytes.Repeat([]byte{0x80, 0x01, 0x7f, 0x3c}, 900))
	f.Add([]byte{1, 4, 1}, bytes.Repeat([]byte{0xff, 0x7b, 0x00, 0x81, 0x55}, 900))
	f.Add([]byte{0x83, 2, 3}, bytes.Repeat([]byte{0x1b, 0x3c, 0xe4}, 900))
	f.Fuzz(func(t *testing.T, shape []byte, data []byte) {
		if len(shape) < 3 {
			return
		}
		nb := 8 * (1 + int(shape[0]&7))
		if shape[0]&0x80 != 0 {
			nb = 1 + int(shape[0]&0x7f)%13
		}
		k, rows := 1+int(shape[1])%6, 1+int(shape[2])%4
		wb, xb := rows*nb*BlockBytesQ2_0, nb*BlockQ2_0/blockQ8_0*blockBytesQ8_0
		k = min(k, (len(data)-wb)/xb)
		if k < 1 {
			return
		}
		acts := make([]Acts, k)
		check := func(name string) {
			for i := range acts {
				acts[i].Set(data[wb+i*xb:wb+(i+1)*xb], nb*BlockQ2_0)
			}
			checkQ2Rows(t, name, data[:wb], nb*BlockBytesQ2_0, rows, acts, rows)
		}
		check(kernelSet)
		eachQ2RowsKernel(check)
	})
}

// BenchmarkDotQ2_0ActsRows compares DotQ2_0ActsRows ("rows") with a loop
// of DotQ2_0Acts ("loop", the runtime's way before it) for a Q2_0 head
// slice of rows rows of n columns against k tokens: 256 rows stay in
// cache (the kernel's ceiling), 65536 rows of 2560 (47 MB) stream from
// memory as a head does. Gweights/s counts weights × tokens.
func BenchmarkDotQ2_0ActsRows(b *testing.B) {
	for _, sh := range []struct{ rows, n int }{{256, 2560}, {256, 5120}, {65536, 2560}} {
		for _, k := range []int{1, 4} {
			r := rand.New(rand.NewPCG(1, 1))
			rb := sh.n / BlockQ2_0 * BlockBytesQ2_0
			row, _ := realistic(r, sh.n, QuantizeRowQ2_0Ref, rb)
			w := bytes.Repeat(row, sh.rows)
			acts := make([]Acts, k)
			for t := range acts {
				_, x := realistic(r, sh.n, QuantizeRowQ2_0Ref, rb)
				acts[t].Set(x, sh.n)
			}
			out := make([]float32, sh.rows*k)
			for _, mode := range []string{"rows", "loop"} {
				b.Run(strconv.Itoa(sh.rows)+"x"+strconv.Itoa(sh.n)+"/"+strconv.Itoa(k)+"/"+mode, func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					f := func() { DotQ2_0ActsRows(w, rb, sh.rows, acts, out, sh.rows) }
					if mode == "loop" {
						f = func() {
							for i := range sh.rows {
								for t := range acts {
									out[t*sh.rows+i] = DotQ2_0Acts(w[i*rb:(i+1)*rb], &acts[t])
								}
							}
						}
					}
					cpubench.Run(b, sh.n*sh.rows*k, f)
					b.ReportMetric(float64(sh.n*sh.rows*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
				})
			}
		}
	}
}
