//go:build !purego

package quant1bit

import "unsafe"

func packWordsAVX2(dst, codes []byte, d []float32, sum []int32, groups, n int, sign int32) {
	if groups == 0 {
		return
	}
	_, _, _, _ = dst[groups*40*n-1], codes[groups*32*n-1], d[groups*n-1], sum[groups*n-1]
	q1PackWords(unsafe.Pointer(&codes[0]), unsafe.Pointer(&d[0]), unsafe.Pointer(&sum[0]), groups, n, sign, unsafe.Pointer(&dst[0]))
}

//go:noescape
func q1PackWords(codes, d, sum unsafe.Pointer, groups, n int, sign int32, dst unsafe.Pointer)

func packBytesAVX2(dst, codes []byte, d []float32, sum []int32, groups int) {
	if groups == 0 {
		return
	}
	_, _, _, _ = dst[groups*batchPairBytes-1], codes[groups*256-1], d[groups*8-1], sum[groups*8-1]
	q1PackBytes(unsafe.Pointer(&codes[0]), unsafe.Pointer(&d[0]), unsafe.Pointer(&sum[0]), groups, unsafe.Pointer(&dst[0]))
}

//go:noescape
func q1PackBytes(codes, d, sum unsafe.Pointer, groups int, dst unsafe.Pointer)

// batchKind names one family of the kernels for prepared activations:
// the Q1_0 batch and rows kernels AVX2, AVX-VNNI or its EVEX twin (on
// Acts.bqb, a step a pair of blocks) or AVX-512 (Acts.bq4, a quad), and
// the Q2_0 rows kernels AVX2, AVX-VNNI, EVEX (Acts.bq2, four blocks a
// step, two tokens a call) or AVX-512 (Acts.bq4, eight blocks).
type batchKind int

const (
	kindAVX2 batchKind = iota
	kindVNNI
	kindEVNNI
	kindQuad
	kindQ2AVX2
	kindQ2VNNI
	kindQ2EVNNI
	kindQ2Quad
)

// q2 reports whether kind's kernels take Q2_0 weights.
func (kind batchKind) q2() bool { return kind >= kindQ2AVX2 }

// shape returns the weight blocks of one step of kind's kernels and the
// most tokens they take.
func (kind batchKind) shape() (per, most int) {
	switch kind {
	case kindQuad:
		return 4, 4
	case kindQ2Quad:
		return 8, 4
	case kindQ2AVX2, kindQ2VNNI, kindQ2EVNNI:
		return 4, 2
	}
	return 2, 4
}

// groupToks points toks at the activations of the first tokens of acts
// (at most kind's, in the layout of its kernels) and returns how many.
func groupToks(toks *[4]unsafe.Pointer, acts []Acts, kind batchKind) int {
	_, most := kind.shape()
	k := min(most, len(acts))
	for i := range k {
		switch kind {
		case kindQuad, kindQ2Quad:
			toks[i] = unsafe.Pointer(&acts[i].bq4[0])
		case kindQ2AVX2, kindQ2VNNI, kindQ2EVNNI:
			acts[i].q2Ready()
			toks[i] = unsafe.Pointer(&acts[i].bq2[0])
		default:
			toks[i] = unsafe.Pointer(&acts[i].bqb[0])
		}
	}
	return k
}

// dotQ1_0ActsBatchAsm runs kind's kernel on groups of four tokens (then
// three, two or one), expanding the weight bits once per group. A
// partial last step comes from a zero-padded copy.
func dotQ1_0ActsBatchAsm(w []byte, acts []Acts, out []float32, stride, nb int, kind batchKind) {
	per, _ := kind.shape()
	var tw [4 * BlockBytesQ1_0]byte
	var pw unsafe.Pointer
	if r := nb % per; r != 0 {
		copy(tw[:], w[(nb-r)*BlockBytesQ1_0:nb*BlockBytesQ1_0])
		pw = unsafe.Pointer(&tw)
	}
	w0 := unsafe.Pointer(&w[0])
	var toks [4]unsafe.Pointer
	for t := 0; t < len(acts); {
		k := groupToks(&toks, acts[t:], kind)
		batchKernel(kind, k, w0, nb/per, pw, &toks, unsafe.Pointer(&out[t*stride]), 4*stride)
		t += k
	}
}

func dotQ1_0ActsBatchAVX2(w []byte, acts []Acts, out []float32, stride, nb int) {
	dotQ1_0ActsBatchAsm(w, acts, out, stride, nb, kindAVX2)
}

func dotQ1_0ActsBatch512(w []byte, acts []Acts, out []float32, stride, nb int) {
	dotQ1_0ActsBatchAsm(w, acts, out, stride, nb, kindQuad)
}

// batchKernel calls kind's kernel for k tokens. The calls are direct so
// that tw and toks stay on the caller's stack (through a func value they
// escape).
func batchKernel(kind batchKind, k int, w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int) {
	switch {
	case kind == kindQuad && k == 4:
		q1Quad4(w, steps, tw, toks, out, stride)
	case kind == kindQuad && k == 3:
		q1Quad3(w, steps, tw, toks, out, stride)
	case kind == kindQuad && k == 2:
		q1Quad2(w, steps, tw, toks, out, stride)
	case kind == kindQuad:
		q1Quad1(w, steps, tw, toks, out, stride)
	case kind == kindVNNI && k == 4:
		q1VNNI4(w, steps, tw, toks, out, stride)
	case kind == kindVNNI && k == 3:
		q1VNNI3(w, steps, tw, toks, out, stride)
	case kind == kindVNNI && k == 2:
		q1VNNI2(w, steps, tw, toks, out, stride)
	case kind == kindVNNI:
		q1VNNI1(w, steps, tw, toks, out, stride)
	case kind == kindEVNNI && k == 4:
		q1EVNNI4(w, steps, tw, toks, out, stride)
	case kind == kindEVNNI && k == 3:
		q1EVNNI3(w, steps, tw, toks, out, stride)
	case kind == kindEVNNI && k == 2:
		q1EVNNI2(w, steps, tw, toks, out, stride)
	case kind == kindEVNNI:
		q1EVNNI1(w, steps, tw, toks, out, stride)
	case k == 4:
		q1Batch4(w, steps, tw, toks, out, stride)
	case k == 3:
		q1Batch3(w, steps, tw, toks, out, stride)
	case k == 2:
		q1Batch2(w, steps, tw, toks, out, stride)
	default:
		q1Batch1(w, steps, tw, toks, out, stride)
	}
}

// dotActsRowsAsm runs kind's rows kernel (Q1_0 or Q2_0) on groups of
// as many tokens as it takes (then fewer), all rows per group: the
// group's activations stay in cache while the rows stream past, and each
// row's weights are expanded once per group. Rows that need a padded
// last step take the per-row Go path, and so do all for the AVX-512 Q2_0
// kernel while a test has the AVX2 layout in place of Acts.bq4.
func dotActsRowsAsm(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int, kind batchKind) {
	per, _ := kind.shape()
	if nb%per != 0 || kind == kindQ2Quad && !quadLayout {
		if kind.q2() {
			dotQ2_0ActsRowsGo(w, rowBytes, rows, acts, out, stride, nb)
		} else {
			dotQ1_0ActsRowsGo(w, rowBytes, rows, acts, out, stride, nb)
		}
		return
	}
	w0 := unsafe.Pointer(&w[0])
	var toks [4]unsafe.Pointer
	for t := 0; t < len(acts); {
		k := groupToks(&toks, acts[t:], kind)
		rowsKernel(kind, k, w0, rowBytes, rows, nb/per, &toks, unsafe.Pointer(&out[t*stride]), 4*stride)
		t += k
	}
}

func dotQ1_0ActsRowsAVX2(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotActsRowsAsm(w, rowBytes, rows, acts, out, stride, nb, kindAVX2)
}

func dotQ1_0ActsRows512(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotActsRowsAsm(w, rowBytes, rows, acts, out, stride, nb, kindQuad)
}

// rowsKernel calls kind's rows kernel for k tokens, directly, as
// batchKernel does.
func rowsKernel(kind batchKind, k int, w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int) {
	switch {
	case kind == kindQuad && k == 4:
		q1QuadRows4(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQuad && k == 3:
		q1QuadRows3(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQuad && k == 2:
		q1QuadRows2(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQuad:
		q1QuadRows1(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindVNNI && k == 4:
		q1VNNIRows4(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindVNNI && k == 3:
		q1VNNIRows3(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindVNNI && k == 2:
		q1VNNIRows2(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindVNNI:
		q1VNNIRows1(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindEVNNI && k == 4:
		q1EVNNIRows4(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindEVNNI && k == 3:
		q1EVNNIRows3(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindEVNNI && k == 2:
		q1EVNNIRows2(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindEVNNI:
		q1EVNNIRows1(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQ2Quad && k == 4:
		q2QuadRows4(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQ2Quad && k == 3:
		q2QuadRows3(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQ2Quad && k == 2:
		q2QuadRows2(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQ2Quad:
		q2QuadRows1(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQ2AVX2 && k == 2:
		q2RowsAVX2_2(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQ2AVX2:
		q2RowsAVX2_1(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQ2VNNI && k == 2:
		q2RowsVNNI2(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQ2VNNI:
		q2RowsVNNI1(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQ2EVNNI && k == 2:
		q2RowsEVNNI2(w, rowBytes, rows, steps, toks, out, stride)
	case kind == kindQ2EVNNI:
		q2RowsEVNNI1(w, rowBytes, rows, steps, toks, out, stride)
	case k == 4:
		q1BatchRows4(w, rowBytes, rows, steps, toks, out, stride)
	case k == 3:
		q1BatchRows3(w, rowBytes, rows, steps, toks, out, stride)
	case k == 2:
		q1BatchRows2(w, rowBytes, rows, steps, toks, out, stride)
	default:
		q1BatchRows1(w, rowBytes, rows, steps, toks, out, stride)
	}
}

// The kernels of dotbatch_amd64.s (AVX2) and dotquad_amd64.s (AVX-512).

//go:noescape
func q1Batch4(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Batch3(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Batch2(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Batch1(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1BatchRows4(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1BatchRows3(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1BatchRows2(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1BatchRows1(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
