//go:build !purego

package kernels

import "unsafe"

// axpySlotsAVX2 takes rows whose length is a multiple of 32 (head sizes
// 64, 128, 256) in assembly, two at a time and the last odd one alone
// (rows are independent, so the split changes no value); others stay in
// Go.
func axpySlotsAVX2(n int, c []float32, cstride int, v []float32, vstride int, ys []float32, m int) {
	d := len(ys) / m
	if d%32 != 0 {
		axpySlotsGo(n, c, cstride, v, vstride, ys, m)
		return
	}
	if pairs := m / 2; pairs > 0 {
		axpySlotsPairsAsm(n, unsafe.Pointer(&c[0]), cstride, unsafe.Pointer(&v[0]), vstride, unsafe.Pointer(&ys[0]), pairs, d)
	}
	if r := m - 1; m%2 == 1 {
		axpySlotsAsm(n, unsafe.Pointer(&c[r]), cstride, unsafe.Pointer(&v[0]), vstride, unsafe.Pointer(&ys[r*d]), 1, d)
	}
}

// axpySlotsAVX512 takes the rows four at a time with the zmm kernel and
// leaves the last m%4 to axpySlotsAVX2: rows are independent, so the
// split changes no value. On the EPYC (Zen 5) the one-row kernel was
// bound by the latency of its four add chains.
func axpySlotsAVX512(n int, c []float32, cstride int, v []float32, vstride int, ys []float32, m int) {
	d := len(ys) / m
	quads := m / 4
	if d%32 != 0 || quads == 0 {
		axpySlotsAVX2(n, c, cstride, v, vstride, ys, m)
		return
	}
	axpySlotsQuadsAsm512(n, unsafe.Pointer(&c[0]), cstride, unsafe.Pointer(&v[0]), vstride, unsafe.Pointer(&ys[0]), quads, d)
	if r := 4 * quads; r < m {
		axpySlotsAVX2(n, c[r:], cstride, v, vstride, ys[r*d:], m-r)
	}
}

//go:noescape
func axpySlotsQuadsAsm512(n int, c unsafe.Pointer, cstride int, v unsafe.Pointer, vstride int, ys unsafe.Pointer, groups, d32 int)

//go:noescape
func axpySlotsPairsAsm(n int, c unsafe.Pointer, cstride int, v unsafe.Pointer, vstride int, ys unsafe.Pointer, groups, d32 int)

//go:noescape
func axpySlotsAsm(n int, c unsafe.Pointer, cstride int, v unsafe.Pointer, vstride int, ys unsafe.Pointer, groups, d32 int)
