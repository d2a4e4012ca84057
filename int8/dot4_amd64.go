//go:build !purego

package int8

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C {
		dotQ8_0SymTokens4 = func(w, x []byte, xstride, nb int, out *[4]float32) {
			dotQ8_0SymTokens4Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), xstride, nb, out)
		}
		dotQ8_0SymTokens8 = func(w, x []byte, xstride int, xd []float32, nb int, out *[8]float32) {
			dotQ8_0SymTokens8Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), xstride, unsafe.Pointer(&xd[0]), nb, out)
		}
	}
}

//go:noescape
func dotQ8_0SymTokens4Asm(w, x unsafe.Pointer, xstride, nb int, out *[4]float32)

//go:noescape
func dotQ8_0SymTokens8Asm(w, x unsafe.Pointer, xstride int, xd unsafe.Pointer, nb int, out *[8]float32)
