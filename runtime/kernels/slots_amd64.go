//go:build !purego

package kernels

import "unsafe"

// axpySlotsAVX2 takes rows whose length is a multiple of 32 (head sizes
// 64, 128, 256) in assembly; others stay in Go.
func axpySlotsAVX2(n int, c []float32, cstride int, v []float32, vstride int, ys []float32, m int) {
	d := len(ys) / m
	if d%32 != 0 {
		axpySlotsGo(n, c, cstride, v, vstride, ys, m)
		return
	}
	axpySlotsAsm(n, unsafe.Pointer(&c[0]), cstride, unsafe.Pointer(&v[0]), vstride, unsafe.Pointer(&ys[0]), m, d)
}

//go:noescape
func axpySlotsAsm(n int, c unsafe.Pointer, cstride int, v unsafe.Pointer, vstride int, ys unsafe.Pointer, m, d32 int)
