//go:build !purego

package kernels

import "unsafe"

// The assembly takes the first n &^ 7 elements; the last few go through
// the Go form, which gives the same bits.

func expAVX2(x []float32) {
	n8 := len(x) &^ 7
	if n8 > 0 {
		expAsm(unsafe.Pointer(&x[0]), n8)
	}
	expGo(x[n8:])
}

func siluMulAVX2(g, u []float32) {
	n8 := len(g) &^ 7
	if n8 > 0 {
		siluMulAsm(unsafe.Pointer(&g[0]), unsafe.Pointer(&u[0]), n8)
	}
	siluMulGo(g[n8:], u[n8:])
}

//go:noescape
func expAsm(x unsafe.Pointer, n8 int)

//go:noescape
func siluMulAsm(gp, up unsafe.Pointer, n8 int)
