//go:build !purego

package int8

import (
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/qnnprep/qnnprep/internal/cpuvendor"
)

// hasAVX512 reports whether the CPU has what the AVX-512 kernels use.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX2 && cpu.X86.HasF16C

// q8Prep is an activation row laid out for dotRowsQ8_0Asm: the codes of
// each group of eight blocks as four 64-byte pairs (block p, block p+4),
// those of the last nb%8 blocks one after another; then per block 128·Σx
// (int32), the correction for the unsigned weights; then per block the
// scale as float32. t is the kernel's scratch for the terms of eight
// rows.
type q8Prep struct {
	buf []byte
	p   []byte // buf from a 64-byte boundary
	t   []float32
}

var prepPool = sync.Pool{New: func() any { return new(q8Prep) }}

func (q *q8Prep) set(x []byte, nb int) {
	n := nb * (BlockQ8_0 + 8)
	q.buf = slices.Grow(q.buf[:0], n+64)[:n+64]
	off := -int(uintptr(unsafe.Pointer(&q.buf[0]))) & 63
	q.p = q.buf[off : off+n]
	prepQ8_0Asm(unsafe.Pointer(&x[0]), nb, unsafe.Pointer(&q.p[0]))
}

// dotQ8_0RowsAVX512 is dotQ8_0SymRows for any codes. The rows are read
// as two streams far apart, the first and the second half of the rows
// side by side, four rows of each per kernel call (the rest one stream,
// up to eight rows per call). Two far streams read memory faster than
// one on the EPYC this was tuned on (plain reads of the mapped 700M
// file, interleaved: 29-33 against 25-29 GB per CPU second), while two
// adjacent rows side by side, or software prefetch, read slower than
// one stream. The streams are prefetched rowsPrefetch512 bytes
// ahead (see there). On the EPYC Zen 5 of session 10, four streams far
// apart (the quarters of the rows, two rows of each per call, as the
// memory-read probe reads) read level with two (GB per CPU second,
// 2048-row calls, interleaved, load 3-4: 27.2 and 26.7 against 26.4 and
// 26.5 at one thread, 53.1 and 50.9 against 52.2 and 51.6 at two; in
// quieter rounds per-round ratio medians 1.01-1.04 at one thread and
// 1.00-1.01 at two; with 1 KiB prefetch 0.96-0.99, and 1.10 only while
// another process streamed the same file), and plain reads of those
// pages were level too (four streams 28.5-33.1, two 28.5-32.9 at one
// thread). With the prefetch, in session 15, four such streams read
// slower than two on a quiet machine (a kernel reading two rows of each
// quarter per call and forming the previous call's sums during its
// first rows, each row's terms and sum this kernel's;
// BenchmarkDotQ8_0Decode, interleaved, one process per form, pinned,
// per-round ratio medians against this kernel at 3264 bytes ahead): at
// one thread 0.97 at 1632 bytes ahead (quartiles 0.96-0.99, 28 rounds)
// and 0.95-0.98 at 1088 to 3264; at two threads (two pinned processes,
// QNNPREP_BENCH_Q8_PART) 0.97 (0.93-0.98, 9 rounds); without prefetch
// 0.64. They read 1.02-1.06 at one thread and 1.10-1.11 at two only in
// rounds shared with other processes (a read probe over the same file
// among them), 0.95-1.00 in others. The kernel reads 87-89% of such a
// plain read; a copy that
// only loads what it loads read 92-95%, one without the block reduction
// and scales ~1-3% faster than the kernel. Session 11 (same EPYC, the
// file's matrices in decoding's order, one call each, GB per CPU second,
// interleaved, load 4-10): the kernel read 0.63-0.84 of a copy of
// bench's probe loop over the same bytes (the less, the more loaded the
// machine), a copy of it that only makes its code loads 0.91 of the
// probe's loop at two streams, one making 64-byte loads from line
// starts instead 0.96-1.01; adding this kernel's four 64-byte scale
// loads, which cross lines, to that last one cost a quarter. Yet a
// kernel that loads each line once from its start and takes codes and
// scales out with VBMI permutes (VPERMT2B, VPERMI2W; 1.13x in cache)
// read 0.86-0.98 of this one, and cutting instructions gained nothing
// from memory: the activation loaded once for both streams (1.10x in
// cache) 0.99, the scales as scalar loads (1.03x) 0.99, VPGATHERDD for
// them (0.59x) 0.88, the sums of a call formed a quarter at the start
// of each row of the next 0.89-0.92. A copy without SUMTERMS at all read
// 1.01-1.10 (SUMTERMS, a chain of ⌈nb/8⌉·8 dependent additions between
// calls, was 6% of the kernel's samples in a decode, its group loop
// 93%); so each call now forms the previous call's sums a step after
// each group of its first row (dotRows2Q8_0Asm), which with the 4352-byte
// prefetch read 1.085 (quartiles 1.05-1.11) at one thread and 1.07
// (1.02-1.10) at two of the kernel that summed at its end (load 3, 40
// rounds; the best rounds 29.4 against 28.1 and 49.6 against 47.8; in
// cache level). The calls' preparation and the Go wrapper are under
// 0.5% of a decode's samples at one and two threads.
func dotQ8_0RowsAVX512(w []byte, rowBytes int, x []byte, nb int, out []float32) {
	q := prepPool.Get().(*q8Prep)
	defer prepPool.Put(q)
	q.set(x, nb)
	var stride int
	q.t, stride = rowTermsN(q.t, nb, 16)
	xp := unsafe.Pointer(&q.p[0])
	// Each call's terms go to one half of t while the call forms the
	// sums of the previous call's, in the other.
	ts := [2]unsafe.Pointer{unsafe.Pointer(&q.t[0]), unsafe.Pointer(&q.t[8*stride])}
	h := len(out) / 2 &^ 3
	var prev, outPrev, outFarPrev unsafe.Pointer
	for r := 0; r < h; r += 4 {
		t := ts[r/4%2]
		dotRows2Q8_0Asm(unsafe.Pointer(&w[r*rowBytes]), h*rowBytes, rowBytes, xp, nb, t, 4*stride, rowsPrefetch512, prev, outPrev, outFarPrev)
		prev, outPrev, outFarPrev = t, unsafe.Pointer(&out[r]), unsafe.Pointer(&out[h+r])
	}
	if prev != nil {
		sumTermsPairAsm(prev, 4*stride, nb, outPrev, outFarPrev)
	}
	for r := 2 * h; r < len(out); r += 8 {
		dotRowsQ8_0Asm(unsafe.Pointer(&w[r*rowBytes]), rowBytes, xp, nb, unsafe.Pointer(&out[r]), min(8, len(out)-r), ts[0], 4*stride)
	}
}

// rowsPrefetch512 is rowsPrefetch for dotQ8_0RowsAVX512: 1024 bytes on
// Intel, 3264 (twelve groups) elsewhere. On the EPYC Zen 5 of session 12
// (a host with more bandwidth than session 11's: the probe read 38 GB/s
// on one core), BenchmarkDotQ8_0Decode read at one thread, GB per CPU
// second, idle, interleaved rounds: none 21.6-23.0, 1024 26.1-26.9, 2176
// 31.0-33.1, 2720 31.4-34.3, 2992 32.3-33.6, 3264 32.2-34.9, 3536
// 32.4-32.8, 3808 31.8-32.3, 4352 29.1-31.1, 8704 30.7-31.2 (4352: the distance session 11
// chose for every kernel): a plateau from ten to fourteen groups, and
// 4352 past its edge. qnnprep bench (700M Q8_0, -n 48, four interleaved
// rounds): 43.0-43.4 tokens/s at one thread against 38.7-39.2 with 4352.
// The AVX2 kernel read 27.9-29.0 at 3264 and 31.2-31.8 at 4352 in the
// same rounds, and the 2-3-token AVX-512 kernel 26.0-27.1 against
// 26.8-28.9 GB/s (two tokens): both keep rowsPrefetch.
var rowsPrefetch512 = func() int {
	if cpuvendor.Intel {
		return rowsPrefetch
	}
	return 3264
}()

//go:noescape
func prepQ8_0Asm(x unsafe.Pointer, nb int, xp unsafe.Pointer)

//go:noescape
func dotRows2Q8_0Asm(w unsafe.Pointer, far, rowBytes int, xp unsafe.Pointer, nb int, t unsafe.Pointer, tStride, pf int, prev, outPrev, outFarPrev unsafe.Pointer)

//go:noescape
func dotRowsQ8_0Asm(w unsafe.Pointer, rowBytes int, xp unsafe.Pointer, nb int, out unsafe.Pointer, rows int, t unsafe.Pointer, tStride int)
