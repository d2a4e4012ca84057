//go:build !purego

package int8

import (
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAVX512 reports whether the CPU has what the AVX-512 kernels use.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX2 && cpu.X86.HasF16C

// q8Prep is an activation row laid out for dotRowsQ8_0Asm: the codes of
// each group of eight blocks as four 64-byte pairs (block p, block p+4),
// those of the last nb%8 blocks one after another; then per block 128·Σx
// (int32), the correction for the unsigned weights; then per block the
// scale as float32.
type q8Prep struct {
	buf []byte
	p   []byte // buf from a 64-byte boundary
}

var prepPool = sync.Pool{New: func() any { return new(q8Prep) }}

func (q *q8Prep) set(x []byte, nb int) {
	n := nb * (BlockQ8_0 + 8)
	q.buf = slices.Grow(q.buf[:0], n+64)[:n+64]
	off := -int(uintptr(unsafe.Pointer(&q.buf[0]))) & 63
	q.p = q.buf[off : off+n]
	prepQ8_0Asm(unsafe.Pointer(&x[0]), nb, unsafe.Pointer(&q.p[0]))
}

// dotQ8_0RowsAVX512 is dotQ8_0SymRows (any codes) two rows at a time;
// an odd last row is taken as a pair with itself. It is not selected:
// with the rows in cache it does 1.9x the AVX2 kernel's work per CPU
// second, but decoding the 700M Q8_0 llama on the loaded 2-vCPU EPYC
// (load 33-41) took 12-15% more CPU time per token with it (two weight
// streams per core against one prefetched stream; A/B interleaved,
// runtime BenchmarkDecode cpu-tok/s 16.3-19.2 vs 18.9-22.8).
// BenchmarkDotQ8_0Rows compares the two; select it once a quiet-machine
// decode shows it ahead.
func dotQ8_0RowsAVX512(w []byte, rowBytes int, x []byte, nb int, out []float32) {
	q := prepPool.Get().(*q8Prep)
	defer prepPool.Put(q)
	q.set(x, nb)
	xp := unsafe.Pointer(&q.p[0])
	// Prefetch the next pair's rows: each row's stream runs into the
	// next pair's rows at the same pace.
	pf := 2 * rowBytes
	if pairs := len(out) / 2; pairs > 0 {
		dotRowsQ8_0Asm(unsafe.Pointer(&w[0]), rowBytes, xp, nb, unsafe.Pointer(&out[0]), pairs, pf)
	}
	if len(out)%2 == 1 {
		var two [2]float32
		r := len(out) - 1
		dotRowsQ8_0Asm(unsafe.Pointer(&w[r*rowBytes]), 0, xp, nb, unsafe.Pointer(&two[0]), 1, pf)
		out[r] = two[0]
	}
}

//go:noescape
func prepQ8_0Asm(x unsafe.Pointer, nb int, xp unsafe.Pointer)

//go:noescape
func dotRowsQ8_0Asm(w unsafe.Pointer, rowBytes int, xp unsafe.Pointer, nb int, out unsafe.Pointer, pairs, pf int)
