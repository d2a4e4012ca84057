package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// deltaKernels are the DeltaRetrieve and DeltaUpdate kernels this CPU runs
// (the Go ones, and those delta_amd64_test.go adds).
var deltaKernels = []deltaKernel{{"go", deltaRetrieveGo, deltaUpdateGo}}

type deltaKernel struct {
	name     string
	retrieve func(alpha float32, st, k, m []float32, stride int)
	update   func(alpha float32, st, k, delta, q, o []float32, stride int)
}

// deltaCalls is what DeltaRetrieve and DeltaUpdate replace: per row
// Scale and Axpy, then Axpy twice, on rows of d = len(m) values stride
// apart.
func deltaCalls(alpha float32, st, k, m, delta, q, o []float32, stride int) {
	d := len(m)
	for i := range k {
		row := st[i*stride : i*stride+d]
		Scale(alpha, row)
		Axpy(k[i], row, m)
	}
	for i := range k {
		row := st[i*stride : i*stride+d]
		Axpy(k[i], delta, row)
		Axpy(q[i], row, o)
	}
}

// checkDelta runs both passes of every kernel on copies of the operands
// and compares the state, m and o with deltaCalls' bit for bit.
func checkDelta(t *testing.T, alpha float32, st, k, m, delta, q, o []float32, stride int) {
	t.Helper()
	clone := func(x []float32) []float32 { return append([]float32(nil), x...) }
	wst, wm, wo := clone(st), clone(m), clone(o)
	deltaCalls(alpha, wst, k, wm, delta, q, wo, stride)
	for _, kern := range deltaKernels {
		gst, gm, gu := clone(st), clone(m), clone(o)
		kern.retrieve(alpha, gst, k, gm, stride)
		kern.update(alpha, gst, k, delta, q, gu, stride)
		for i := range wm {
			if !blocks.SameFloat(gm[i], wm[i]) {
				t.Fatalf("%s: dk=%d d=%d stride=%d: m[%d] = %v, calls %v", kern.name, len(k), len(m), stride, i, gm[i], wm[i])
			}
			if !blocks.SameFloat(gu[i], wo[i]) {
				t.Fatalf("%s: dk=%d d=%d stride=%d: o[%d] = %v, calls %v", kern.name, len(k), len(m), stride, i, gu[i], wo[i])
			}
		}
		for i := range wst {
			if !blocks.SameFloat(gst[i], wst[i]) {
				t.Fatalf("%s: dk=%d d=%d stride=%d: state[%d] = %v, calls %v", kern.name, len(k), len(m), stride, i, gst[i], wst[i])
			}
		}
	}
}

// TestDeltaMatchesCalls compares every DeltaRetrieve and DeltaUpdate kernel
// with the Scale and Axpy calls they replace, bit for bit, over row
// lengths with and without the vector strips (64, 128 and every tail),
// strided rows, and special values (±0, subnormals, ±Inf, NaN) in every
// operand.
func TestDeltaMatchesCalls(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	ds := []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 56, 63, 64, 65, 72, 120, 127, 128, 129, 136, 192, 200, 255, 256, 257, 384}
	alphas := []float32{0.97, 1, 0, float32(math.Copysign(0, -1)), 1e-40, float32(math.Inf(1)), float32(math.NaN())}
	for iter := range 6 {
		edges := iter%2 == 1
		for _, dk := range []int{1, 3, 16, 128} {
			for _, d := range ds {
				stride := d + iter%3*8*r.IntN(3)
				st := randomF32(r, (dk-1)*stride+d, edges)
				k, q := randomF32(r, dk, edges), randomF32(r, dk, edges)
				m, delta, o := randomF32(r, d, edges), randomF32(r, d, edges), randomF32(r, d, edges)
				alpha := float32(r.Float64())
				if edges {
					alpha = alphas[r.IntN(len(alphas))]
				}
				checkDelta(t, alpha, st, k, m, delta, q, o, stride)
			}
		}
	}
}

// TestDelta checks the exported forms: m and o start at zero in the
// runtime, DeltaRetrieve leaves the state as it is and DeltaUpdate scales
// it as it adds to it.
func TestDelta(t *testing.T) {
	st := []float32{1, 2, 3, 4, 5, 6}
	k, q := []float32{1, -1}, []float32{2, 0.5}
	m := make([]float32, 3)
	DeltaRetrieve(0.5, st, k, m)
	if want := []float32{-1.5, -1.5, -1.5}; !equalF32(m, want) || !equalF32(st, []float32{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("DeltaRetrieve: m %v (want %v), state %v", m, want, st)
	}
	o := make([]float32, 4)
	DeltaUpdate(0.5, st, k, []float32{1, 0, -1}, q, o)
	// Rows: {1.5, 1, 0.5} and {1, 2.5, 4}; o = 2·row0 + 0.5·row1.
	if want := []float32{3.5, 3.25, 3, 0}; !equalF32(o, want) || !equalF32(st, []float32{1.5, 1, 0.5, 1, 2.5, 4}) {
		t.Fatalf("DeltaUpdate: o %v (want %v), state %v", o, want, st)
	}
	for name, f := range map[string]func(){
		"retrieve state": func() { DeltaRetrieve(1, make([]float32, 5), make([]float32, 2), make([]float32, 3)) },
		"update state": func() {
			DeltaUpdate(1, make([]float32, 5), make([]float32, 2), make([]float32, 3), make([]float32, 2), make([]float32, 3))
		},
		"update q": func() {
			DeltaUpdate(1, make([]float32, 6), make([]float32, 2), make([]float32, 3), make([]float32, 1), make([]float32, 3))
		},
		"update o": func() {
			DeltaUpdate(1, make([]float32, 6), make([]float32, 2), make([]float32, 3), make([]float32, 2), make([]float32, 2))
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// FuzzDelta feeds arbitrary bits to every DeltaRetrieve and DeltaUpdate
// kernel and compares them with the calls they replace. shape chooses
// the rows, the row length (strips of 128, 64 and 8 and tails) and the
// stride.
func FuzzDelta(f *testing.F) {
	f.Add([]byte{3, 128, 0}, bytes.Repeat([]byte{0x00, 0x80, 0xff, 0x7f, 0x01, 0x3c, 0x00, 0x00, 0x55, 0x03, 0x80, 0x3f}, 2000))
	f.Add([]byte{1, 77, 2}, bytes.Repeat([]byte{0x01, 0x00, 0x80, 0x80, 0xaa, 0xbb, 0x80, 0xbf}, 4000))
	f.Fuzz(func(t *testing.T, shape, data []byte) {
		if len(shape) < 3 {
			return
		}
		dk, d := 1+int(shape[0])%9, 1+int(shape[1])+int(shape[2]&0x80)
		stride := d + int(shape[2])%3
		n := (dk-1)*stride + d + 2*dk + 3*d + 1
		if len(data) < 4*n {
			return
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		st, x := x[:(dk-1)*stride+d], x[(dk-1)*stride+d:]
		k, q, x := x[:dk], x[dk:2*dk], x[2*dk:]
		m, delta, o := x[:d], x[d:2*d], x[2*d:3*d]
		checkDelta(t, x[3*d], st, k, m, delta, q, o, stride)
	})
}

// BenchmarkDeltaRule runs the delta rule as the runtime did with four
// calls per row ("calls") and with DeltaRetrieve and DeltaUpdate ("fused"),
// Dk = Dv = 128: over one value head (64 KiB of state, in cache) and over
// the 384 heads of one token of a Qwen3.5-shaped model (12 DeltaNet
// layers of 32 heads, 24 MiB: the state comes from memory, as in
// decoding).
func BenchmarkDeltaRule(b *testing.B) {
	const dk, dv = 128, 128
	r := rand.New(rand.NewPCG(1, 1))
	k, q, v := randomF32(r, dk, false), randomF32(r, dk, false), randomF32(r, dv, false)
	m, o := make([]float32, dv), make([]float32, dv)
	// alpha 1 and a small beta keep the state from growing or vanishing
	// over the iterations.
	const alpha, beta = 1, 1e-3
	delta := func() {
		for j := range m {
			m[j] = beta * (v[j] - m[j])
		}
	}
	calls := func(s []float32) {
		clear(m)
		for i := range dk {
			row := s[i*dv : (i+1)*dv]
			Scale(alpha, row)
			Axpy(k[i], row, m)
		}
		delta()
		clear(o)
		for i := range dk {
			row := s[i*dv : (i+1)*dv]
			Axpy(k[i], m, row)
			Axpy(q[i], row, o)
		}
	}
	fused := func(s []float32) {
		clear(m)
		DeltaRetrieve(alpha, s, k, m)
		delta()
		clear(o)
		DeltaUpdate(alpha, s, k, m, q, o)
	}
	for _, heads := range []int{1, 384} {
		st := randomF32(r, heads*dk*dv, false)
		for _, f := range []struct {
			name string
			step func([]float32)
		}{{"calls", calls}, {"fused", fused}} {
			b.Run(fmt.Sprintf("heads=%d/%s", heads, f.name), func(b *testing.B) {
				cpubench.Run(b, 0, func() {
					for h := range heads {
						f.step(st[h*dk*dv : (h+1)*dk*dv])
					}
				})
			})
		}
	}
}
