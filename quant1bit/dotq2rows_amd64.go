//go:build !purego

package quant1bit

import "unsafe"

// dotQ2_0ActsRows512 runs the AVX-512 rows kernel (eight Q2_0 blocks a
// step, on Acts.bq4) on groups of four tokens (then three, two or one),
// all rows per group: the group's activations stay in cache while the
// rows stream past, and each row's codes are expanded once per group.
// Rows that are not whole steps take the per-row kernel, and so do all
// while a test has the AVX2 layout in place of Acts.bq4.
func dotQ2_0ActsRows512(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	if nb%8 != 0 || !quadLayout {
		dotQ2_0ActsRowsGo(w, rowBytes, rows, acts, out, stride, nb)
		return
	}
	w0 := unsafe.Pointer(&w[0])
	var toks [4]unsafe.Pointer
	for t := 0; t < len(acts); {
		k := groupToks(&toks, acts[t:], kindQuad)
		o := unsafe.Pointer(&out[t*stride])
		switch k {
		case 4:
			q2QuadRows4(w0, rowBytes, rows, nb/8, &toks, o, 4*stride)
		case 3:
			q2QuadRows3(w0, rowBytes, rows, nb/8, &toks, o, 4*stride)
		case 2:
			q2QuadRows2(w0, rowBytes, rows, nb/8, &toks, o, 4*stride)
		default:
			q2QuadRows1(w0, rowBytes, rows, nb/8, &toks, o, 4*stride)
		}
		t += k
	}
}

// The kernels of dotq2rows_amd64.s.

//go:noescape
func q2QuadRows4(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q2QuadRows3(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q2QuadRows2(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q2QuadRows1(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

// dotQ2_0ActsRowsAVX2 runs the AVX2 rows kernel (four Q2_0 blocks a
// step, on Acts.bq2) on pairs of tokens (then one), all rows per pair.
// Rows that are not whole steps take the per-row kernel.
func dotQ2_0ActsRowsAVX2(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotQ2_0ActsRowsY(w, rowBytes, rows, acts, out, stride, nb, kindAVX2)
}

// dotQ2_0ActsRowsVNNI is dotQ2_0ActsRowsAVX2 with the AVX-VNNI kernels.
func dotQ2_0ActsRowsVNNI(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotQ2_0ActsRowsY(w, rowBytes, rows, acts, out, stride, nb, kindVNNI)
}

// dotQ2_0ActsRowsEVNNI is dotQ2_0ActsRowsVNNI with the EVEX VPDPBUSD.
func dotQ2_0ActsRowsEVNNI(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotQ2_0ActsRowsY(w, rowBytes, rows, acts, out, stride, nb, kindEVNNI)
}

// dotQ2_0ActsRowsY runs kind's rows kernel (kindAVX2, kindVNNI or
// kindEVNNI).
func dotQ2_0ActsRowsY(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int, kind batchKind) {
	if nb%4 != 0 {
		dotQ2_0ActsRowsGo(w, rowBytes, rows, acts, out, stride, nb)
		return
	}
	for t := range acts {
		acts[t].q2Ready()
	}
	w0 := unsafe.Pointer(&w[0])
	var toks [4]unsafe.Pointer
	for t := 0; t < len(acts); {
		k := min(2, len(acts)-t)
		for i := range k {
			toks[i] = unsafe.Pointer(&acts[t+i].bq2[0])
		}
		o := unsafe.Pointer(&out[t*stride])
		switch {
		case kind == kindVNNI && k == 2:
			q2RowsVNNI2(w0, rowBytes, rows, nb/4, &toks, o, 4*stride)
		case kind == kindVNNI:
			q2RowsVNNI1(w0, rowBytes, rows, nb/4, &toks, o, 4*stride)
		case kind == kindEVNNI && k == 2:
			q2RowsEVNNI2(w0, rowBytes, rows, nb/4, &toks, o, 4*stride)
		case kind == kindEVNNI:
			q2RowsEVNNI1(w0, rowBytes, rows, nb/4, &toks, o, 4*stride)
		case k == 2:
			q2RowsAVX2_2(w0, rowBytes, rows, nb/4, &toks, o, 4*stride)
		default:
			q2RowsAVX2_1(w0, rowBytes, rows, nb/4, &toks, o, 4*stride)
		}
		t += k
	}
}

//go:noescape
func q2RowsAVX2_2(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q2RowsAVX2_1(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q2RowsVNNI2(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q2RowsVNNI1(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q2RowsEVNNI2(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q2RowsEVNNI1(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
