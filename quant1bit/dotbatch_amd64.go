//go:build !purego

package quant1bit

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C {
		dotQ1_0ActsBatch = dotQ1_0ActsBatchAVX2
		dotQ1_0ActsRows = dotQ1_0ActsRowsAVX2
		batchLayout = true
		packWords = packWordsAVX2
		if hasQuad {
			useQuad()
		}
	}
}

func packWordsAVX2(dst, codes []byte, d []float32, sum []int32, groups, n int, sign int32) {
	if groups == 0 {
		return
	}
	_, _, _, _ = dst[groups*40*n-1], codes[groups*32*n-1], d[groups*n-1], sum[groups*n-1]
	q1PackWords(unsafe.Pointer(&codes[0]), unsafe.Pointer(&d[0]), unsafe.Pointer(&sum[0]), groups, n, sign, unsafe.Pointer(&dst[0]))
}

//go:noescape
func q1PackWords(codes, d, sum unsafe.Pointer, groups, n int, sign int32, dst unsafe.Pointer)

// dotQ1_0ActsBatchAVX2 runs the kernel on groups of four tokens (then
// three, two or one), expanding the weight bits once per group.
func dotQ1_0ActsBatchAVX2(w []byte, acts []Acts, out []float32, stride, nb int) {
	var tw [2 * BlockBytesQ1_0]byte
	var pw unsafe.Pointer
	if nb%2 == 1 {
		copy(tw[:], w[(nb-1)*BlockBytesQ1_0:nb*BlockBytesQ1_0])
		pw = unsafe.Pointer(&tw)
	}
	w0 := unsafe.Pointer(&w[0])
	var toks [4]unsafe.Pointer
	for t := 0; t < len(acts); {
		k := min(4, len(acts)-t)
		for i := range k {
			toks[i] = unsafe.Pointer(&acts[t+i].bq[0])
		}
		o := unsafe.Pointer(&out[t*stride])
		switch k {
		case 4:
			q1Batch4(w0, nb/2, pw, &toks, o, 4*stride)
		case 3:
			q1Batch3(w0, nb/2, pw, &toks, o, 4*stride)
		case 2:
			q1Batch2(w0, nb/2, pw, &toks, o, 4*stride)
		default:
			q1Batch1(w0, nb/2, pw, &toks, o, 4*stride)
		}
		t += k
	}
}

// dotQ1_0ActsRowsAVX2 calls the kernel for each row directly when all
// tokens fit one group and the rows need no padded last block.
func dotQ1_0ActsRowsAVX2(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	if len(acts) > 4 || nb%2 == 1 {
		dotQ1_0ActsRowsGo(w, rowBytes, rows, acts, out, stride, nb)
		return
	}
	var toks [4]unsafe.Pointer
	for i := range acts {
		toks[i] = unsafe.Pointer(&acts[i].bq[0])
	}
	kernel := [...]func(unsafe.Pointer, int, unsafe.Pointer, *[4]unsafe.Pointer, unsafe.Pointer, int){
		q1Batch1, q1Batch2, q1Batch3, q1Batch4}[len(acts)-1]
	for r := range rows {
		kernel(unsafe.Pointer(&w[r*rowBytes]), nb/2, nil, &toks, unsafe.Pointer(&out[r]), 4*stride)
	}
}

//go:noescape
func q1Batch4(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Batch3(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Batch2(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Batch1(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
