//go:build !purego

package kernels

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/qnnprep/qnnprep/internal/panel"
)

type f16Scratch struct {
	panel []float32 // [i%8][i/32][(i%32)/8][row] for element i
	stage []byte    // a short last panel's rows and zero rows
	r8    []float32 // [class][token][row]
	out   []float32 // [token][row]
}

var f16Pool = sync.Pool{New: func() any { return new(f16Scratch) }}

// halfType is what MulF16 and MulBF16 differ in: the panel layout (the
// weights' widening) and the products taken one by one (rows that are
// not whole groups of 32).
type halfType struct {
	layout func(w []byte, rowBytes, m int, dst []float32, lanes int)
	each   mulFunc
}

var (
	f16Type  = halfType{panel.F16, mulF16Go}
	bf16Type = halfType{panel.BF16, mulBF16Go}
)

func mulF16AVX2(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	mulAVX2(f16Type, w, rowBytes, rows, x, out, outStride)
}

func mulBF16AVX2(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	mulAVX2(bf16Type, w, rowBytes, rows, x, out, outStride)
}

func mulAVX2(h halfType, w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	mulF16Panels(h, w, rowBytes, rows, x, out, outStride, f16PanelRows, f16PanelTokens, func(src []byte, stride, m, groups int, s *f16Scratch) {
		h.layout(src, stride, m, s.panel, 8)
		mulF16PanelAsm(unsafe.Pointer(&s.panel[0]), m, unsafe.Pointer(&x.x[0]), 4*x.n, groups, unsafe.Pointer(&s.r8[0]), unsafe.Pointer(&s.out[0]))
	})
}

// mulF16Panels runs a panel kernel over w's rows, panelRows at a time
// (a short last panel padded with zero rows), each panel against every
// token in groups of panelTokens (the last group completed with F16Batch's
// zero rows); the kernel fills s.out
// ([token][panelRows]float32) from rows src, stride bytes apart, laid out
// by h.
func mulF16Panels(h halfType, w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride, panelRows, panelTokens int, kernel func(src []byte, stride, m, groups int, s *f16Scratch)) {
	n := x.n
	if n%32 != 0 || n == 0 {
		h.each(w, rowBytes, rows, x, out, outStride)
		return
	}
	s := f16Pool.Get().(*f16Scratch)
	defer f16Pool.Put(s)
	groups := (x.t + panelTokens - 1) / panelTokens
	np, nout := panelRows*n, groups*panelTokens*panelRows
	s.panel = slices.Grow(s.panel[:0], np)[:np]
	s.r8 = slices.Grow(s.r8[:0], 8*nout)[:8*nout]
	s.out = slices.Grow(s.out[:0], nout)[:nout]
	m := n / 32
	for r0 := 0; r0 < rows; r0 += panelRows {
		nr := min(panelRows, rows-r0)
		src, stride := w[r0*rowBytes:], rowBytes
		if nr < panelRows {
			stride = 2 * n
			s.stage = slices.Grow(s.stage[:0], panelRows*stride)[:panelRows*stride]
			src = s.stage
			clear(src)
			for r := range nr {
				copy(src[r*stride:(r+1)*stride], w[(r0+r)*rowBytes:(r0+r)*rowBytes+2*n])
			}
		}
		kernel(src, stride, m, groups, s)
		for t := range x.t {
			copy(out[t*outStride+r0:t*outStride+r0+nr], s.out[t*panelRows:t*panelRows+nr])
		}
	}
}

// mulF16PanelAsm computes the panel's eight rows against groups·3
// activation rows of 32·m values (F16Batch's order, tokenBytes apart) into
// out ([token][8]float32), with r8 as scratch ([8][token][8]float32).
//
//go:noescape
func mulF16PanelAsm(panel unsafe.Pointer, m int, x unsafe.Pointer, tokenBytes, groups int, r8, out unsafe.Pointer)

// mulF16AVX512 is mulF16AVX2 with sixteen rows per panel, one zmm lane
// each, and four tokens per pass: twice the products per broadcast
// activation.
func mulF16AVX512(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	mulAVX512(f16Type, w, rowBytes, rows, x, out, outStride)
}

func mulBF16AVX512(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	mulAVX512(bf16Type, w, rowBytes, rows, x, out, outStride)
}

func mulAVX512(h halfType, w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	mulF16Panels(h, w, rowBytes, rows, x, out, outStride, 16, 4, func(src []byte, stride, m, groups int, s *f16Scratch) {
		h.layout(src, stride, m, s.panel, 16)
		h.layout(src[8*stride:], stride, m, s.panel[8:], 16)
		mulF16PanelAsm512(unsafe.Pointer(&s.panel[0]), m, unsafe.Pointer(&x.x[0]), 4*x.n, groups, unsafe.Pointer(&s.r8[0]), unsafe.Pointer(&s.out[0]))
	})
}

// mulF16PanelAsm512 is mulF16PanelAsm for a sixteen-row panel and groups
// of four tokens (r8 [8][token][16]float32, out [token][16]float32).
//
//go:noescape
func mulF16PanelAsm512(panel unsafe.Pointer, m int, x unsafe.Pointer, tokenBytes, groups int, r8, out unsafe.Pointer)
