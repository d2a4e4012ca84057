//go:build !purego

package kernels

import "unsafe"

// flashF16AVX2 runs the assembly on up to eight heads at a time (one
// lane each for the softmax step) when d is a whole number of 32s, as
// DotRows' assembly takes it; other head sizes go through the Go form.
func flashF16AVX2(q, k, v []float32, stride, ns, d int, scale float32, m, sum, o []float32) {
	if d == 0 || d%32 != 0 {
		flashF16Go(q, k, v, stride, ns, d, scale, m, sum, o)
		return
	}
	// Slots the prefetch may reach from k[0] and v[0].
	pf := (min(len(k), len(v))-d)/stride + 1
	for h0 := 0; h0 < len(m); h0 += 8 {
		hn := min(8, len(m)-h0)
		// st holds max, sum, and the assembly's scratch, eight lanes each;
		// the unused lanes (max 0, sum 0, score 0) compute ignored values.
		var st [40]float32
		copy(st[0:hn], m[h0:])
		copy(st[8:8+hn], sum[h0:])
		flashF16Asm(unsafe.Pointer(&q[h0*d]), unsafe.Pointer(&k[0]), unsafe.Pointer(&v[0]), unsafe.Pointer(&o[h0*d]), unsafe.Pointer(&st),
			4*stride, ns, pf, 4*d, hn, scale)
		copy(m[h0:h0+hn], st[0:hn])
		copy(sum[h0:h0+hn], st[8:8+hn])
	}
}

//go:noescape
func flashF16Asm(q, k, v, o, st unsafe.Pointer, strideBytes, ns, pf, dBytes, hc int, scale float32)
