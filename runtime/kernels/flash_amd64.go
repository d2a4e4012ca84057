//go:build !purego

package kernels

import "unsafe"

// flashF16AVX512 is flashF16AVX2 with the AVX-512 binary16 passes.
func flashF16AVX512(q, k, v []float32, stride, ns, d int, scale float32, m, sum, o []float32) {
	flashF16Call(flashF16Asm512, q, k, v, stride, ns, d, scale, m, sum, o)
}

func flashF16AVX2(q, k, v []float32, stride, ns, d int, scale float32, m, sum, o []float32) {
	flashF16Call(flashF16Asm, q, k, v, stride, ns, d, scale, m, sum, o)
}

// flashF16Call runs the assembly on up to eight heads at a time (one
// lane each for the softmax step) when d is a whole number of 32s up to
// flashMaxD, as DotRows' assembly takes it; other head sizes go through
// the Go form.
func flashF16Call(asm flashAsm, q, k, v []float32, stride, ns, d int, scale float32, m, sum, o []float32) {
	if d == 0 || d%32 != 0 || d > flashMaxD {
		flashF16Go(q, k, v, stride, ns, d, scale, m, sum, o)
		return
	}
	// Slots the prefetch may reach from k[0] and v[0].
	pf := (min(len(k), len(v))-d)/stride + 1
	for h0 := 0; h0 < len(m); h0 += 8 {
		hn := min(8, len(m)-h0)
		// The unused lanes (max 0, sum 0, score 0) compute ignored values.
		var st flashState
		copy(st.f[0:hn], m[h0:])
		copy(st.f[8:8+hn], sum[h0:])
		asm(unsafe.Pointer(&q[h0*d]), unsafe.Pointer(&k[0]), unsafe.Pointer(&v[0]), unsafe.Pointer(&o[h0*d]), unsafe.Pointer(&st),
			4*stride, ns, pf, 4*d, hn, scale)
		copy(m[h0:h0+hn], st.f[0:hn])
		copy(sum[h0:h0+hn], st.f[8:8+hn])
	}
}

// flashMaxD is the largest head size the assembly takes (Gemma's 256).
const flashMaxD = 256

// flashState is the assembly's state and scratch: max, sum, and the
// scores, ms and vs of a slot, eight lanes each (f), and the V row
// widened to float64 once for all heads (vd, at byte 192).
type flashState struct {
	f  [48]float32
	vd [flashMaxD]float64
}

// flashAsm is the signature of the assembly kernels.
type flashAsm = func(q, k, v, o, st unsafe.Pointer, strideBytes, ns, pf, dBytes, hc int, scale float32)

//go:noescape
func flashF16Asm512(q, k, v, o, st unsafe.Pointer, strideBytes, ns, pf, dBytes, hc int, scale float32)

//go:noescape
func flashF16Asm(q, k, v, o, st unsafe.Pointer, strideBytes, ns, pf, dBytes, hc int, scale float32)
