//go:build !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 {
		scaleMaxRows = scaleMaxRowsAVX2
		subRows = func(s, v []float32) { rowsOp(s, v, subRowsGo, subRowsAsm) }
		mulRows = func(s, v []float32) { rowsOp(s, v, mulRowsGo, mulRowsAsm) }
		sumRowsF64 = sumRowsF64AVX2
	}
}

// The assembly takes rows whose length is a multiple of 8 (every GQA
// group of 8 heads, or a block of tokens by such a group); other lengths
// stay in Go.

func scaleMaxRowsAVX2(s []float32, scale float32, mx []float32) {
	if len(mx)%8 != 0 {
		scaleMaxRowsGo(s, scale, mx)
		return
	}
	scaleMaxRowsAsm(unsafe.Pointer(&s[0]), scale, unsafe.Pointer(&mx[0]), len(mx), len(s)/len(mx))
}

func rowsOp(s, v []float32, goOp func(s, v []float32), asmOp func(s, v unsafe.Pointer, m, rows int)) {
	if len(v)%8 != 0 {
		goOp(s, v)
		return
	}
	asmOp(unsafe.Pointer(&s[0]), unsafe.Pointer(&v[0]), len(v), len(s)/len(v))
}

func sumRowsF64AVX2(sum []float64, s []float32) {
	if len(sum)%8 != 0 {
		sumRowsF64Go(sum, s)
		return
	}
	sumRowsF64Asm(unsafe.Pointer(&sum[0]), unsafe.Pointer(&s[0]), len(sum), len(s)/len(sum))
}

//go:noescape
func scaleMaxRowsAsm(s unsafe.Pointer, scale float32, mx unsafe.Pointer, m, rows int)

//go:noescape
func subRowsAsm(s, v unsafe.Pointer, m, rows int)

//go:noescape
func mulRowsAsm(s, v unsafe.Pointer, m, rows int)

//go:noescape
func sumRowsF64Asm(sum, s unsafe.Pointer, m, rows int)
