//go:build !purego

package kernels

import (
	"sync"
	"unsafe"
)

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
	st := flashStates.Get().(*flashState)
	// Slots the prefetch may reach from k[0] and v[0].
	pf := (min(len(k), len(v))-d)/stride + 1
	for h0 := 0; h0 < len(m); h0 += 8 {
		hn := min(8, len(m)-h0)
		// The unused lanes compute ignored values from whatever they hold.
		copy(st.f[0:hn], m[h0:])
		copy(st.f[8:8+hn], sum[h0:])
		for j0 := 0; j0 < ns; j0 += flashSlots {
			kb := j0 * stride
			asm(unsafe.Pointer(&q[h0*d]), unsafe.Pointer(&k[kb]), unsafe.Pointer(&v[kb]), unsafe.Pointer(&o[h0*d]), unsafe.Pointer(st),
				4*stride, min(flashSlots, ns-j0), pf-j0, 4*d, hn, scale)
		}
		copy(m[h0:h0+hn], st.f[0:hn])
		copy(sum[h0:h0+hn], st.f[8:8+hn])
	}
	flashStates.Put(st)
}

var flashStates = sync.Pool{New: func() any { return new(flashState) }}

// flashMaxD is the largest head size the assembly takes (Gemma's 256).
const flashMaxD = 256

// flashSlots is how many slots one assembly call takes.
const flashSlots = 64

// flashState is the assembly's state and scratch (offsets in
// flash_amd64.s): max and sum, eight lanes each, and eight lanes of
// partial sums per head (f, sums at byte 64); the V row widened to
// float64 once for all heads (vd, at byte 320); per slot ms, vs and the
// moved heads' bits (rec, at byte 2368).
type flashState struct {
	f   [80]float32
	vd  [flashMaxD]float64
	rec [flashSlots][24]float32
}

// flashAsm is the signature of the assembly kernels.
type flashAsm = func(q, k, v, o, st unsafe.Pointer, strideBytes, ns, pf, dBytes, hc int, scale float32)

//go:noescape
func flashF16Asm512(q, k, v, o, st unsafe.Pointer, strideBytes, ns, pf, dBytes, hc int, scale float32)

//go:noescape
func flashF16Asm(q, k, v, o, st unsafe.Pointer, strideBytes, ns, pf, dBytes, hc int, scale float32)
