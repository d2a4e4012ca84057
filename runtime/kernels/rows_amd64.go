//go:build !purego

package kernels

import "unsafe"

// dotRowsAVX2 handles whole groups of 32 in one call per batch of rows
// (the common head sizes 64 and 128); other lengths go one Dot at a time.
func dotRowsAVX2(x, rows, out []float32) {
	n := len(x)
	if n%32 != 0 {
		dotRowsGo(x, rows, out)
		return
	}
	dotRowsAsm(unsafe.Pointer(&x[0]), unsafe.Pointer(&rows[0]), n, len(out), unsafe.Pointer(&out[0]))
}

// dotRowsSlotsAVX2 takes head sizes that are a multiple of 32 (64, 128,
// 256) in assembly, the others in Go.
func dotRowsSlotsAVX2(n int, k []float32, kstride, d int, q []float32, qstride, tokens, m int, out []float32, ostride int) {
	if d%32 != 0 {
		dotRowsSlotsGo(n, k, kstride, d, q, qstride, tokens, m, out, ostride)
		return
	}
	dotRowsSlotsAsm(unsafe.Pointer(&k[0]), 4*kstride, n, unsafe.Pointer(&q[0]), 4*(qstride-m*d), tokens, m, d,
		unsafe.Pointer(&out[0]), 4*(ostride-tokens*m))
}

func axpyRowsAVX2(a, x, ys []float32) {
	n := len(x)
	if n%8 != 0 {
		axpyRowsGo(a, x, ys)
		return
	}
	axpyRowsAsm(unsafe.Pointer(&a[0]), unsafe.Pointer(&x[0]), unsafe.Pointer(&ys[0]), n, len(a))
}

//go:noescape
func dotRowsAsm(x, rows unsafe.Pointer, n32, m int, out unsafe.Pointer)

//go:noescape
func dotRowsSlotsAsm(k unsafe.Pointer, kstride, n int, q unsafe.Pointer, qskip, tokens, m, d32 int, out unsafe.Pointer, oskip int)

//go:noescape
func axpyRowsAsm(a, x, ys unsafe.Pointer, n8, m int)

//go:noescape
func prefetchAsm(p unsafe.Pointer, n int)

// madF16AVX2 and scaleF16AVX2 run the assembly on whole groups of 4 or 8
// and the Go code on the rest: the same operations either way.
func madF16AVX2(a float32, x, y []float32) {
	n4 := len(x) &^ 3
	if n4 > 0 {
		madF16Asm(a, unsafe.Pointer(&x[0]), unsafe.Pointer(&y[0]), n4)
	}
	madF16Go(a, x[n4:], y[n4:])
}

func scaleF16AVX2(a float32, x, y []float32) {
	n8 := len(x) &^ 7
	if n8 > 0 {
		scaleF16Asm(a, unsafe.Pointer(&x[0]), unsafe.Pointer(&y[0]), n8)
	}
	scaleF16Go(a, x[n8:], y[n8:])
}

//go:noescape
func madF16Asm(a float32, x, y unsafe.Pointer, n4 int)

//go:noescape
func scaleF16Asm(a float32, x, y unsafe.Pointer, n8 int)
