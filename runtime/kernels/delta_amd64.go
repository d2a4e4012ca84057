//go:build !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 {
		deltaRetrieve, deltaUpdate = deltaRetrieveAVX2, deltaUpdateAVX2
		if hasAVX512 {
			deltaRetrieve, deltaUpdate = deltaRetrieveAVX512, deltaUpdateAVX512
		}
	}
}

// deltaRetrieveAVX2 and deltaUpdateAVX2 take strips of 128 columns, then of
// 64, then of 8, and leave the last d%8 columns to Go. A strip of 128
// keeps the first 64 accumulators in 8 ymm registers and adds the others
// in memory (16 registers do not hold them all): against two strips of
// 64 it took 0.89x the CPU time over states coming from memory
// (BenchmarkDeltaRule, heads=384) and 1.10x over one state in cache
// (heads=1), whole rows streaming better than half rows; a
// decode reads the state from memory.
func deltaRetrieveAVX2(alpha float32, st, k, m []float32, stride int) {
	d, j := len(m), 0
	for ; j+8 <= d; j += deltaStrip(d - j) {
		deltaRetrieveAsm(alpha, unsafe.Pointer(&st[j]), unsafe.Pointer(&k[0]), unsafe.Pointer(&m[j]), len(k), stride, deltaStrip(d-j))
	}
	if j < d {
		deltaRetrieveGo(alpha, st[j:], k, m[j:], stride)
	}
}

func deltaUpdateAVX2(alpha float32, st, k, delta, q, o []float32, stride int) {
	d, j := len(delta), 0
	for ; j+8 <= d; j += deltaStrip(d - j) {
		deltaUpdateAsm(alpha, unsafe.Pointer(&st[j]), unsafe.Pointer(&k[0]), unsafe.Pointer(&delta[j]), unsafe.Pointer(&q[0]), unsafe.Pointer(&o[j]), len(k), stride, deltaStrip(d-j))
	}
	if j < d {
		deltaUpdateGo(alpha, st[j:], k, delta[j:], q, o[j:], stride)
	}
}

// deltaStrip is the width of the AVX2 kernels' next strip when n ≥ 8
// columns are left: 128, 64 or 8.
func deltaStrip(n int) int {
	switch {
	case n >= 128:
		return 128
	case n >= 64:
		return 64
	}
	return 8
}

// deltaRetrieveAVX512 and deltaUpdateAVX512 take strips of 128 columns (8
// zmm registers; the update also holds delta's strip in 8) and leave the
// rest to the AVX2 kernels.
func deltaRetrieveAVX512(alpha float32, st, k, m []float32, stride int) {
	d, j := len(m), 0
	for ; j+128 <= d; j += 128 {
		deltaRetrieveAsm512(alpha, unsafe.Pointer(&st[j]), unsafe.Pointer(&k[0]), unsafe.Pointer(&m[j]), len(k), stride)
	}
	if j < d {
		deltaRetrieveAVX2(alpha, st[j:], k, m[j:], stride)
	}
}

func deltaUpdateAVX512(alpha float32, st, k, delta, q, o []float32, stride int) {
	d, j := len(delta), 0
	for ; j+128 <= d; j += 128 {
		deltaUpdateAsm512(alpha, unsafe.Pointer(&st[j]), unsafe.Pointer(&k[0]), unsafe.Pointer(&delta[j]), unsafe.Pointer(&q[0]), unsafe.Pointer(&o[j]), len(k), stride)
	}
	if j < d {
		deltaUpdateAVX2(alpha, st[j:], k, delta[j:], q, o[j:], stride)
	}
}

// deltaRetrieveAsm runs deltaRetrieveGo on one strip of w = 128, 64 or 8
// columns of n rows.
//
//go:noescape
func deltaRetrieveAsm(alpha float32, st, k, m unsafe.Pointer, n, stride, w int)

// deltaUpdateAsm runs deltaUpdateGo on one strip of w = 128, 64 or 8
// columns of n rows.
//
//go:noescape
func deltaUpdateAsm(alpha float32, st, k, delta, q, o unsafe.Pointer, n, stride, w int)

//go:noescape
func deltaRetrieveAsm512(alpha float32, st, k, m unsafe.Pointer, n, stride int)

//go:noescape
func deltaUpdateAsm512(alpha float32, st, k, delta, q, o unsafe.Pointer, n, stride int)
