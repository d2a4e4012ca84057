//go:build !purego

package kernels

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C {
		mulF16 = mulF16AVX2
	}
}

// f16PanelRows weight rows share a panel (one vector lane each), and
// f16PanelTokens tokens meet it per kernel call.
const (
	f16PanelRows   = 8
	f16PanelTokens = 3
)

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
	s.panel = growF32s(s.panel, f16PanelRows*n)
	s.r8 = growF32s(s.r8, 8*groups*f16PanelTokens*f16PanelRows)
	s.out = growF32s(s.out, groups*f16PanelTokens*f16PanelRows)
	m := n / 32
	for r0 := 0; r0 < rows; r0 += f16PanelRows {
		nr := min(f16PanelRows, rows-r0)
		src, stride := w[r0*rowBytes:], rowBytes
		if nr < f16PanelRows {
			if cap(s.stage) < f16PanelRows*2*n {
				s.stage = make([]byte, f16PanelRows*2*n)
			}
			stride = 2 * n
			src = s.stage[:f16PanelRows*stride]
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
