//go:build !purego

package kernels

import (
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C {
		mulF16 = mulF16AVX2
	}
}

type f16Scratch struct {
	panel []float32 // [i%8][i/32][(i%32)/8][row] for element i
	stage []byte    // a short last panel's rows and zero rows
	r8    []float32 // [class][token][row]
	out   []float32 // [token][row]
}

var f16Pool = sync.Pool{New: func() any { return new(f16Scratch) }}

func mulF16AVX2(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	n := x.n
	if n%32 != 0 || n == 0 {
		mulF16Go(w, rowBytes, rows, x, out, outStride)
		return
	}
	s := f16Pool.Get().(*f16Scratch)
	defer f16Pool.Put(s)
	groups := x.padded() / f16PanelTokens
	np, nout := f16PanelRows*n, groups*f16PanelTokens*f16PanelRows
	s.panel = slices.Grow(s.panel[:0], np)[:np]
	s.r8 = slices.Grow(s.r8[:0], 8*nout)[:8*nout]
	s.out = slices.Grow(s.out[:0], nout)[:nout]
	m := n / 32
	for r0 := 0; r0 < rows; r0 += f16PanelRows {
		nr := min(f16PanelRows, rows-r0)
		src, stride := w[r0*rowBytes:], rowBytes
		if nr < f16PanelRows {
			stride = 2 * n
			s.stage = slices.Grow(s.stage[:0], f16PanelRows*stride)[:f16PanelRows*stride]
			src = s.stage
			clear(src)
			for r := range nr {
				copy(src[r*stride:(r+1)*stride], w[(r0+r)*rowBytes:(r0+r)*rowBytes+2*n])
			}
		}
		panelF16Asm(unsafe.Pointer(&src[0]), stride, m, unsafe.Pointer(&s.panel[0]))
		mulF16PanelAsm(unsafe.Pointer(&s.panel[0]), m, unsafe.Pointer(&x.x[0]), 4*n, groups, unsafe.Pointer(&s.r8[0]), unsafe.Pointer(&s.out[0]))
		for t := range x.t {
			copy(out[t*outStride+r0:t*outStride+r0+nr], s.out[t*f16PanelRows:t*f16PanelRows+nr])
		}
	}
}

// panelF16Asm converts eight rows of 32·m binary16 values (rowBytes apart)
// into the panel layout.
//
//go:noescape
func panelF16Asm(w unsafe.Pointer, rowBytes, m int, panel unsafe.Pointer)

// mulF16PanelAsm computes the panel's eight rows against groups·3
// activation rows of 32·m values (F16Batch's order, tokenBytes apart) into
// out ([token][8]float32), with r8 as scratch ([8][token][8]float32).
//
//go:noescape
func mulF16PanelAsm(panel unsafe.Pointer, m int, x unsafe.Pointer, tokenBytes, groups int, r8, out unsafe.Pointer)
