package kernels

import "fmt"

// AxpySlots adds n cache slots' value rows into m output rows: for each
// slot j < n in order and each row r < m,
//
//	ys[r·d:(r+1)·d] += c[j·cstride+r] · v[j·vstride : j·vstride+d]
//
// with d = len(ys)/m, each product rounded before it is added: bit for bit
// n calls of AxpyRows(c[j·cstride:], v[j·vstride:], ys). The vector form
// keeps an output row's values in registers across the slots instead of
// loading and storing them once per slot, which bounded attention's
// weighted sum by the stores. It panics if an operand is too short.
func AxpySlots(n int, c []float32, cstride int, v []float32, vstride int, ys []float32, m int) {
	if n == 0 || m == 0 {
		return
	}
	if n < 0 || m < 0 || len(ys)%m != 0 {
		panic(fmt.Sprintf("kernels: AxpySlots: %d slots into %d values in %d rows", n, len(ys), m))
	}
	d := len(ys) / m
	if cstride < m || (n-1)*cstride+m > len(c) || vstride < 0 || (n-1)*vstride+d > len(v) {
		panic(fmt.Sprintf("kernels: AxpySlots: %d slots need c %d (stride %d) and v %d (stride %d), have %d and %d",
			n, (n-1)*cstride+m, cstride, (n-1)*vstride+d, vstride, len(c), len(v)))
	}
	if d == 0 {
		return
	}
	axpySlots(n, c, cstride, v, vstride, ys, m)
}

var axpySlots = axpySlotsGo

func axpySlotsGo(n int, c []float32, cstride int, v []float32, vstride int, ys []float32, m int) {
	d := len(ys) / m
	for j := range n {
		axpyRows(c[j*cstride:j*cstride+m], v[j*vstride:j*vstride+d], ys)
	}
}
