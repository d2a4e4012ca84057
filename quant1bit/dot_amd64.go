//go:build !purego

package quant1bit

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C {
		dotQ1_0 = dotQ1_0AVX2
		dotQ2_0 = dotQ2_0AVX2
		dotQ1_0Acts = dotQ1_0ActsAVX2
		dotQ2_0Acts = dotQ2_0ActsAVX2
		dotQ1_0ActsBatch = dotQ1_0ActsBatchAVX2
		dotQ1_0ActsRows = dotQ1_0ActsRowsAVX2
		dotQ2_0ActsRows = dotQ2_0ActsRowsAVX2
		byteLayout = true
		packWords = packWordsAVX2
		packBytes = packBytesAVX2
		kernelSet = "avx2"
		switch {
		case hasQuad:
			useQuad()
			dotQ2_0ActsRows = dotQ2_0ActsRows512
		case hasVNNI:
			useVNNI(kindVNNI)
		case hasEVNNI:
			useVNNI(kindEVNNI)
		}
	}
}

func dotQ1_0AVX2(w, x []byte, nb int) float32 {
	// Pairs of blocks in place; an odd last block from zero-padded copies.
	var tw [2 * BlockBytesQ1_0]byte
	var tx [8 * blockBytesQ8_0]byte
	var pw, px unsafe.Pointer
	if nb%2 == 1 {
		b := nb - 1
		copy(tw[:], w[b*BlockBytesQ1_0:nb*BlockBytesQ1_0])
		copy(tx[:], x[4*b*blockBytesQ8_0:4*nb*blockBytesQ8_0])
		pw, px = unsafe.Pointer(&tw), unsafe.Pointer(&tx)
	}
	return dotQ1_0Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), nb/2, pw, px)
}

func dotQ2_0AVX2(w, x []byte, nb int) float32 {
	// Groups of four blocks in place; the last 1–3 from zero-padded copies.
	var tw [4 * BlockBytesQ2_0]byte
	var tx [8 * blockBytesQ8_0]byte
	var pw, px unsafe.Pointer
	if r := nb % 4; r != 0 {
		b := nb - r
		copy(tw[:], w[b*BlockBytesQ2_0:nb*BlockBytesQ2_0])
		copy(tx[:], x[2*b*blockBytesQ8_0:2*nb*blockBytesQ8_0])
		pw, px = unsafe.Pointer(&tw), unsafe.Pointer(&tx)
	}
	return dotQ2_0Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), nb/4, pw, px)
}

func dotQ2_0ActsAVX2(w []byte, a *Acts, nb int) float32 {
	var tw [4 * BlockBytesQ2_0]byte
	var pw unsafe.Pointer
	if r := nb % 4; r != 0 {
		copy(tw[:], w[(nb-r)*BlockBytesQ2_0:nb*BlockBytesQ2_0])
		pw = unsafe.Pointer(&tw)
	}
	return dotQ2_0ActsAsm(unsafe.Pointer(&w[0]), unsafe.Pointer(&a.codes[0]), unsafe.Pointer(&a.d[0]), unsafe.Pointer(&a.sum[0]), nb/4, pw)
}

//go:noescape
func dotQ2_0ActsAsm(w, codes, d, sum unsafe.Pointer, steps int, tw unsafe.Pointer) float32

func dotQ1_0ActsAVX2(w []byte, a *Acts, nb int) float32 {
	var tw [2 * BlockBytesQ1_0]byte
	var pw unsafe.Pointer
	if nb%2 == 1 {
		copy(tw[:], w[(nb-1)*BlockBytesQ1_0:nb*BlockBytesQ1_0])
		pw = unsafe.Pointer(&tw)
	}
	return dotQ1_0ActsAsm(unsafe.Pointer(&w[0]), unsafe.Pointer(&a.codes[0]), unsafe.Pointer(&a.d[0]), unsafe.Pointer(&a.sum[0]), nb/2, pw)
}

//go:noescape
func dotQ1_0ActsAsm(w, codes, d, sum unsafe.Pointer, steps int, tw unsafe.Pointer) float32

//go:noescape
func dotQ1_0Asm(w, x unsafe.Pointer, steps int, tw, tx unsafe.Pointer) float32

//go:noescape
func dotQ2_0Asm(w, x unsafe.Pointer, steps int, tw, tx unsafe.Pointer) float32
