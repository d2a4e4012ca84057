//go:build !purego

package quant1bit

import "unsafe"

// dotQ2_0ActsRows512 runs the AVX-512 rows kernel (eight Q2_0 blocks a
// step, on Acts.bq4) on groups of four tokens; see dotActsRowsAsm.
func dotQ2_0ActsRows512(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotActsRowsAsm(w, rowBytes, rows, acts, out, stride, nb, kindQ2Quad)
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
// step, on Acts.bq2, filled on first use) on pairs of tokens (then one);
// see dotActsRowsAsm.
func dotQ2_0ActsRowsAVX2(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotActsRowsAsm(w, rowBytes, rows, acts, out, stride, nb, kindQ2AVX2)
}

// dotQ2_0ActsRowsVNNI is dotQ2_0ActsRowsAVX2 with the AVX-VNNI kernels.
func dotQ2_0ActsRowsVNNI(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotActsRowsAsm(w, rowBytes, rows, acts, out, stride, nb, kindQ2VNNI)
}

// dotQ2_0ActsRowsEVNNI is dotQ2_0ActsRowsVNNI with the EVEX VPDPBUSD.
func dotQ2_0ActsRowsEVNNI(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	dotActsRowsAsm(w, rowBytes, rows, acts, out, stride, nb, kindQ2EVNNI)
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
