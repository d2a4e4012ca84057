//go:build !purego

package int8

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/qnnprep/qnnprep/internal/panel"
)

func mulQ8_0AVX2(w []byte, rowBytes, rows int, x *Q8_0Batch, out []float32, outStride int) {
	mulQ8_0Panels(panelPath{layoutInt16, kernelAVX2}, w, rowBytes, rows, x, out, outStride)
}

func mulQ8_0AVX512(w []byte, rowBytes, rows int, x *Q8_0Batch, out []float32, outStride int) {
	mulQ8_0Panels(panelPath{layoutInt16, kernelAVX512}, w, rowBytes, rows, x, out, outStride)
}

// panelPath is how mulQ8_0Panels lays a panel piece out (nb blocks of
// panelRows rows at src, stride bytes apart) and runs it against every
// token group: blocks k0 to k1 of x.
type panelPath struct {
	layout func(src []byte, stride, nb int, s *panelScratch)
	kernel func(s *panelScratch, x *Q8_0Batch, k0, k1, groups int)
}

// layoutInt16 lays a piece out as panel.Q8_0 does, codes as int16.
func layoutInt16(src []byte, stride, nb int, s *panelScratch) {
	panel.Q8_0(src, stride, nb, s.codes, s.d)
}

func kernelAVX2(s *panelScratch, x *Q8_0Batch, k0, k1, groups int) {
	mulQ8_0KernelAsm(unsafe.Pointer(&s.codes[0]), unsafe.Pointer(&s.d[0]), unsafe.Pointer(&x.x[k0*BlockQ8_0]), 2*x.stride,
		unsafe.Pointer(&x.d[k0*4]), x.nb, k1-k0, groups, unsafe.Pointer(&s.sums[0]))
}

func kernelAVX512(s *panelScratch, x *Q8_0Batch, k0, k1, groups int) {
	mulQ8_0KernelAVX512Asm(unsafe.Pointer(&s.codes[0]), unsafe.Pointer(&s.d[0]), unsafe.Pointer(&x.x[k0*BlockQ8_0]), 2*x.stride,
		unsafe.Pointer(&x.d[k0*4]), x.nb, k1-k0, groups, unsafe.Pointer(&s.sums[0]))
}

// panelScratch is one worker's panel piece, scales, staging rows for a
// short last panel, and output sums.
type panelScratch struct {
	codes []int16   // [block][pair][row] pairs of int16: 512 per block
	bytes []byte    // [block][quad][row] quads of w XOR 0x80 (layoutBytes): 512 per block
	d     []float32 // [block][row]
	stage []byte    // panelRows rows of panelBlocks blocks
	sums  []float32 // [token group][4][panelRows]
}

var panelPool = sync.Pool{New: func() any {
	return &panelScratch{
		codes: make([]int16, panelBlocks*panelRows*BlockQ8_0),
		d:     make([]float32, panelBlocks*panelRows),
		stage: make([]byte, panelRows*panelBlocks*BlockBytesQ8_0),
	}
}}

// mulQ8_0Panels is mulQ8_0 in panels: each panel piece is laid out once
// (p.layout) and then meets every token group (p.kernel), while the
// next piece is fetched from memory.
func mulQ8_0Panels(p panelPath, w []byte, rowBytes, rows int, x *Q8_0Batch, out []float32, outStride int) {
	s := panelPool.Get().(*panelScratch)
	defer panelPool.Put(s)
	groups := (x.t + 3) / 4
	ns := groups * 4 * panelRows
	s.sums = slices.Grow(s.sums[:0], ns)[:ns]
	nb := x.nb
	const bb = BlockBytesQ8_0
	for r0 := 0; r0 < rows; r0 += panelRows {
		nr := min(panelRows, rows-r0)
		clear(s.sums)
		for k0 := 0; k0 < nb; k0 += panelBlocks {
			k1 := min(k0+panelBlocks, nb)
			src, stride := w[r0*rowBytes+k0*bb:], rowBytes
			if nr < panelRows {
				// A short panel: its rows and zero rows behind them.
				stride = (k1 - k0) * bb
				clear(s.stage)
				for r := range nr {
					copy(s.stage[r*stride:(r+1)*stride], w[(r0+r)*rowBytes+k0*bb:])
				}
				src = s.stage
			}
			p.layout(src, stride, k1-k0, s)
			// The next piece: further along these rows, or the next panel.
			if nk, nr0 := k1, r0; nk < nb || nr0+panelRows < rows {
				if nk == nb {
					nk, nr0 = 0, nr0+panelRows
				}
				prefetchRowsAsm(unsafe.Pointer(&w[nr0*rowBytes+nk*bb]), rowBytes, min(panelRows, rows-nr0), min(panelBlocks, nb-nk)*bb)
			}
			p.kernel(s, x, k0, k1, groups)
		}
		for t := range x.t {
			copy(out[t*outStride+r0:t*outStride+r0+nr], s.sums[t*panelRows:t*panelRows+nr])
		}
	}
}

//go:noescape
func mulQ8_0KernelAsm(codes, d, x unsafe.Pointer, xstride int, xd unsafe.Pointer, xdBlocks, nb, groups int, sums unsafe.Pointer)

//go:noescape
func mulQ8_0KernelAVX512Asm(codes, d, x unsafe.Pointer, xstride int, xd unsafe.Pointer, xdBlocks, nb, groups int, sums unsafe.Pointer)

// prefetchRowsAsm asks for n bytes of rows rows at p, rowBytes apart, to
// be brought into L2.
//
//go:noescape
func prefetchRowsAsm(p unsafe.Pointer, rowBytes, rows, n int)
