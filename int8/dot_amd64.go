//go:build !purego

package int8

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasF16C

// init selects every kernel of the package for this CPU.
func init() {
	if hasAVX2 {
		dotQ8_0 = dotQ8_0AVX2
		dotQ8_0Sym = dotQ8_0SymAVX2
		dotQ8_0SymRows = dotQ8_0SymRowsAVX2
		quantizeQ8_0 = quantizeQ8_0AVX2
		mulQ8_0 = mulQ8_0AVX2
		kernelSet = "avx2"
	}
	if hasAVX512 {
		dotQ8_0SymRows = dotQ8_0RowsAVX512
		mulQ8_0 = mulQ8_0AVX512
		kernelSet = "avx512"
	}
}

func dotQ8_0AVX2(w, x []byte, nb int) float32 {
	return dotQ8_0Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), nb)
}

func dotQ8_0SymAVX2(w, x []byte, nb int) float32 {
	return dotQ8_0SymAsm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), nb)
}

// dotQ8_0SymRowsAVX2 reads the rows as two streams far apart, row r of
// the first half beside row r of the second, without software prefetch:
// faster than one stream prefetched 2 KiB ahead on the EPYC this was
// tuned on (BenchmarkDotQ8_0Rows over the mapped 700M file, interleaved:
// 17.0-18.5 against 15.0-16.5 GB/s, load 3).
func dotQ8_0SymRowsAVX2(w []byte, rowBytes int, x []byte, nb int, out []float32) {
	px := unsafe.Pointer(&x[0])
	h := len(out) / 2
	for r := range h {
		dotQ8_0Sym2Asm(unsafe.Pointer(&w[r*rowBytes]), h*rowBytes, px, nb, unsafe.Pointer(&out[r]), h*4)
	}
	if len(out)%2 == 1 {
		r := len(out) - 1
		out[r] = dotQ8_0SymAsm(unsafe.Pointer(&w[r*rowBytes]), px, nb)
	}
}

//go:noescape
func dotQ8_0Sym2Asm(w unsafe.Pointer, far int, x unsafe.Pointer, nb int, out unsafe.Pointer, outFar int)

//go:noescape
func dotQ8_0SymAsm(w, x unsafe.Pointer, nb int) float32

//go:noescape
func dotQ8_0Asm(w, x unsafe.Pointer, nb int) float32

// quantizeQ8_0AVX2 encodes blocks in assembly until one holds a NaN or
// ±Inf, which the Go encoder takes (ggml's sequential max treats NaN in a
// way a vector max does not).
func quantizeQ8_0AVX2(src []float32, dst []byte) {
	nb := len(src) / BlockQ8_0
	for b := 0; b < nb; {
		b += quantizeQ8_0Asm(unsafe.Pointer(&src[b*BlockQ8_0]), unsafe.Pointer(&dst[b*BlockBytesQ8_0]), nb-b)
		if b < nb {
			quantizeBlockQ8_0((*[BlockQ8_0]float32)(src[b*BlockQ8_0:]), (*[BlockBytesQ8_0]byte)(dst[b*BlockBytesQ8_0:]))
			b++
		}
	}
}

//go:noescape
func quantizeQ8_0Asm(x, y unsafe.Pointer, nb int) int
