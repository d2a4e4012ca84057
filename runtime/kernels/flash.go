package kernels

import "fmt"

// FlashF16 runs ns steps of llama.cpp's F16-KV flash attention for len(m)
// query heads of one token that share a KV head: for slot j < ns (K row
// k[j·stride:j·stride+d], V row likewise in v) and head h (query
// q[h·d:(h+1)·d], running output o[h·d:(h+1)·d] in binary16, running max
// m[h] and sum sum[h] in float32):
//
//	s := DotRows(k_j, q)[h] · scale
//	if s > m[h] { ms = Expf(m[h] − s); m[h] = s; ScaleF16(ms, o_h) } else { vs = Expf(s − m[h]) }
//	MadF16(vs, v_j, o_h); sum[h] = sum[h]·ms + vs   (ms, vs 1 where not set)
//
// One call for a run of slots replaces DotRows, Expf, ScaleF16 and MadF16
// per slot and head, whose calls cost more than their arithmetic at the
// head sizes of attention. The results are those calls' bits. It panics
// if a slice is too short.
func FlashF16(q, k, v []float32, stride, ns, d int, scale float32, m, sum, o []float32) {
	hc := len(m)
	if len(sum) < hc || len(q) < hc*d || len(o) < hc*d {
		panic(fmt.Sprintf("kernels: FlashF16: %d heads of %d: len(sum) = %d, len(q) = %d, len(o) = %d", hc, d, len(sum), len(q), len(o)))
	}
	if ns <= 0 || hc == 0 {
		return
	}
	if need := (ns-1)*stride + d; len(k) < need || len(v) < need {
		panic(fmt.Sprintf("kernels: FlashF16: %d slots of stride %d: len(k) = %d, len(v) = %d", ns, stride, len(k), len(v)))
	}
	flashF16(q[:hc*d], k, v, stride, ns, d, scale, m, sum[:hc], o[:hc*d])
}

var flashF16 = flashF16Go

// flashF16Go is FlashF16 as the calls it replaces (through the selected
// kernels, which give the Go versions' bits).
func flashF16Go(q, k, v []float32, stride, ns, d int, scale float32, m, sum, o []float32) {
	flashSteps(dotF32, scaleF16, madF16, q, k, v, stride, ns, d, scale, m, sum, o)
}

// flashSteps is FlashF16's loop on the given dot product and binary16
// updates (the selected kernels, or the tests' pure-Go ones).
func flashSteps(dot func(a, b []float32) float32, scaleF16, madF16 func(a float32, x, y []float32),
	q, k, v []float32, stride, ns, d int, scale float32, m, sum, o []float32) {
	for j := range ns {
		kj := k[j*stride : j*stride+d]
		vj := v[j*stride : j*stride+d]
		for h := range m {
			oh := o[h*d : (h+1)*d]
			var s float32 // DotRows' 0 for d = 0
			if d > 0 {
				s = dot(kj, q[h*d:(h+1)*d])
			}
			s *= scale
			ms, vs := float32(1), float32(1)
			if s > m[h] {
				ms = Expf(m[h] - s)
				m[h] = s
				scaleF16(ms, oh, oh)
			} else {
				vs = Expf(s - m[h])
			}
			madF16(vs, vj, oh)
			sum[h] = sum[h]*ms + vs
		}
	}
}
