//go:build !purego

package quant1bit

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasQuad reports whether the CPU runs the AVX-512 batch kernel: byte
// and word ops, EVEX on 256-bit registers, VPERMT2B (VBMI), VPDPBUSD
// (VNNI) and VPSHUFBITQMB (BITALG).
var hasQuad = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VBMI && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512BITALG

// useQuad makes the AVX-512 kernel DotQ1_0ActsBatch's and
// DotQ1_0ActsRows', with its activation layout in place of the AVX2
// one. The float32 steps are the AVX2 kernel's, so the results are the
// same bits.
func useQuad() {
	dotQ1_0ActsBatch = dotQ1_0ActsBatch512
	dotQ1_0ActsRows = dotQ1_0ActsRows512
	batchLayout, quadLayout = false, true
	kernelSet = "avx512"
}

// dotQ1_0ActsBatch512 runs the kernel on groups of four tokens (then
// three, two or one), expanding the weight bits once per group.
func dotQ1_0ActsBatch512(w []byte, acts []Acts, out []float32, stride, nb int) {
	var tw [4 * BlockBytesQ1_0]byte
	var pw unsafe.Pointer
	if r := nb % 4; r != 0 {
		copy(tw[:], w[(nb-r)*BlockBytesQ1_0:nb*BlockBytesQ1_0])
		pw = unsafe.Pointer(&tw)
	}
	w0 := unsafe.Pointer(&w[0])
	var toks [4]unsafe.Pointer
	for t := 0; t < len(acts); {
		k := min(4, len(acts)-t)
		for i := range k {
			toks[i] = unsafe.Pointer(&acts[t+i].bq4[0])
		}
		q1Quad(k, w0, nb/4, pw, &toks, unsafe.Pointer(&out[t*stride]), 4*stride)
		t += k
	}
}

// q1Quad calls q1QuadK for k tokens. The calls are direct so that tw and
// toks stay on the caller's stack (through a func value they escape).
func q1Quad(k int, w unsafe.Pointer, nquads int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int) {
	switch k {
	case 4:
		q1Quad4(w, nquads, tw, toks, out, stride)
	case 3:
		q1Quad3(w, nquads, tw, toks, out, stride)
	case 2:
		q1Quad2(w, nquads, tw, toks, out, stride)
	default:
		q1Quad1(w, nquads, tw, toks, out, stride)
	}
}

// dotQ1_0ActsRows512 runs the rows kernel on groups of four tokens (then
// three, two or one), all rows per group: the group's activations stay
// in cache while the rows stream past. Rows that need a padded last
// quad take the per-row path.
func dotQ1_0ActsRows512(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	if nb%4 != 0 {
		dotQ1_0ActsRowsGo(w, rowBytes, rows, acts, out, stride, nb)
		return
	}
	w0 := unsafe.Pointer(&w[0])
	var toks [4]unsafe.Pointer
	for t := 0; t < len(acts); {
		k := min(4, len(acts)-t)
		for i := range k {
			toks[i] = unsafe.Pointer(&acts[t+i].bq4[0])
		}
		o := unsafe.Pointer(&out[t*stride])
		switch k {
		case 4:
			q1QuadRows4(w0, rowBytes, rows, nb/4, &toks, o, 4*stride)
		case 3:
			q1QuadRows3(w0, rowBytes, rows, nb/4, &toks, o, 4*stride)
		case 2:
			q1QuadRows2(w0, rowBytes, rows, nb/4, &toks, o, 4*stride)
		default:
			q1QuadRows1(w0, rowBytes, rows, nb/4, &toks, o, 4*stride)
		}
		t += k
	}
}

//go:noescape
func q1Quad4(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Quad3(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Quad2(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1Quad1(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1QuadRows4(w unsafe.Pointer, rowBytes, rows, nquads int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1QuadRows3(w unsafe.Pointer, rowBytes, rows, nquads int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1QuadRows2(w unsafe.Pointer, rowBytes, rows, nquads int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)

//go:noescape
func q1QuadRows1(w unsafe.Pointer, rowBytes, rows, nquads int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
