//go:build !purego

package half

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 {
		bf16Slice = bf16SliceAVX2
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C && f16cMatchesTable() {
		f16Slice = f16SliceF16C
	}
}

//go:noescape
func bf16ToF32Asm(dst *float32, src *byte, n int)

//go:noescape
func f16ToF32Asm(dst *float32, src *byte, n int)

func bf16SliceAVX2(dst []float32, src []byte) {
	n := len(dst) &^ 15
	if n > 0 {
		bf16ToF32Asm(unsafe.SliceData(dst), unsafe.SliceData(src), n)
	}
	bf16SliceGo(dst[n:], src[2*n:])
}

func f16SliceF16C(dst []float32, src []byte) {
	n := len(dst) &^ 15
	if n > 0 {
		f16ToF32Asm(unsafe.SliceData(dst), unsafe.SliceData(src), n)
	}
	f16SliceGo(dst[n:], src[2*n:])
}

// f16cMatchesTable checks VCVTPH2PS against the table for every binary16
// pattern (NaN payloads included); the assembly is used only if it gives
// the same bits everywhere.
func f16cMatchesTable() bool {
	src := make([]byte, 2<<16)
	for i := range 1 << 16 {
		src[2*i], src[2*i+1] = byte(i), byte(i>>8)
	}
	dst := make([]float32, 1<<16)
	f16ToF32Asm(&dst[0], &src[0], len(dst))
	for i, v := range dst {
		if *(*uint32)(unsafe.Pointer(&v)) != *(*uint32)(unsafe.Pointer(&f16Table[i])) {
			return false
		}
	}
	return true
}
