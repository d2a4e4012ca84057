//go:build !purego

package int8

import (
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/qnnprep/qnnprep/internal/cpuvendor"
)

var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasF16C

// init selects every kernel of the package for this CPU.
func init() {
	if hasAVX2 {
		dotQ8_0 = dotQ8_0AVX2
		dotQ8_0Sym = dotQ8_0SymAVX2
		dotQ8_0SymRows = dotQ8_0SymRowsAVX2
		quantizeQ8_0 = quantizeQ8_0AVX2
		mulQ8_0 = mulQ8_0AVX2
		kernelSet = "avx2"
	}
	if hasAVXVNNI && !hasAVX512 {
		mulQ8_0 = mulQ8_0AVXVNNI
		setVNNI = setVNNIBatch
		kernelSet = "avx2+avxvnni"
	}
	if hasAVX512 {
		dotQ8_0SymRows = dotQ8_0RowsAVX512
		mulQ8_0 = mulQ8_0AVX512
		kernelSet = "avx512"
	}
	if amxUsable() {
		mulQ8_0 = mulQ8_0AMX
		setAMX = setAMXBatch
		kernelSet = "avx512+amx"
	}
}

func dotQ8_0AVX2(w, x []byte, nb int) float32 {
	return dotQ8_0Asm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), nb)
}

func dotQ8_0SymAVX2(w, x []byte, nb int) float32 {
	return dotQ8_0SymAsm(unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]), nb)
}

// rowsPrefetch is how far ahead (bytes) the decoding row kernels
// prefetch each of their two streams: 1024 on Intel, 4352 elsewhere. On
// the Intel Xeon (KVM) they were tuned on, the hardware prefetcher alone
// leaves the loads waiting: over the mapped 700M file (BenchmarkDotQ8_0Rows
// "file", interleaved, load 8-11) the AVX2 kernel read 15.4-16.3 against
// 12.5-13.2 GB per CPU second and the AVX-512 one 15.8-16.7 against
// 14.3-14.9 (768 and 1536 bytes were no faster, PREFETCHT1/T2 slower,
// PREFETCHNTA half the speed; four streams far apart instead of two
// gained nothing once prefetched). On the EPYC the kernels were first
// tuned on, software prefetch read slower than none, and again on the
// EPYC Zen 5 of session 10 with the present kernels (file in 2048-row
// calls, interleaved, load 2-4, GB per CPU second): AVX-512 none 19.9 /
// 256 B 18.8 at one thread, 45.1 / 40.1 at two (27.3 none against 24.5,
// 22.3 and 25.7 for 256, 512 and 1024 B over the whole file); AVX2
// none 27.7 / 512 B 23.4 at one thread, 256 B level within the noise
// (-6% to +4%); after the AVX2 kernel's unpacking sums, at two threads
// AVX2 none 46.0 / 256 B 44.0 / 1 KiB 41.1 / 2 KiB 44.9 / 4 KiB 45.7,
// AVX-512 none 48.5 / 2 KiB 47.2 / 4 KiB 47.4. Plain reads there were
// slower with prefetch too. On the same EPYC in session 11, measured
// over the file's matrices in decoding's order (BenchmarkDotQ8_0Decode's
// calls; GB per CPU second, 40-60 interleaved rounds, per-round ratios
// against none: median and quartiles), 4352 bytes (16 groups) ahead
// read level while the machine was lightly shared (load 3: AVX-512 0.99
// at one thread and at two, AVX2 1.00 and 1.03, quartiles within
// 0.95-1.14) and faster while it was loaded (load 6-10: AVX-512 1.18
// (1.02-1.28) and 1.30 (1.10-1.56), AVX2 1.12 (1.08-1.19) and 1.25
// (1.11-1.32); 2176 bytes a little less), its slowest rounds faster
// always: under load the memory's latency grows and the hardware
// prefetchers alone leave the kernels' loads waiting. The 2- and
// 3-token kernel (multi_amd64.go) takes it too: 1.36 and 1.28 at load 5.
// Other AMD CPUs take it untried at this distance.
var rowsPrefetch = func() int {
	if cpuvendor.Intel {
		return 1024
	}
	return 4352
}()

// dotQ8_0SymRowsAVX2 reads the rows as dotQ8_0RowsAVX512 does: two
// streams far apart, the first and the second half of the rows, four
// rows of each per kernel call, row i of each side by side, the eight
// rows' serial sums with lanes over rows (dotRows2SymAsm); the last rows
// (fewer than eight) one by one. Against two rows per call, each with
// its own chain of additions, it takes 15% less CPU in cache and, with
// the prefetch, 21% less over the mapped 700M file on the Intel Xeon
// (reading the four rows of each side side by side, block by block, was
// a quarter slower from memory). On the EPYC Zen 5 (session 10, 2048-row
// calls, interleaved, load 3) the older two rows per call read 11%
// slower at two threads (39.4 against 44.3 GB per CPU second) and 7% at
// one (19.1 against 20.5). Four streams far apart (the quarters of the
// rows, two rows of each per call) depended on the machine's state there
// (per-round ratio medians against this kernel, 2048-row calls): 1.06-1.10
// at one thread and 1.04-1.16 at two in one stretch, 0.82-0.89 and
// 0.93-1.02 in another (less bandwidth, nothing else running in the VM),
// 1.03 and 0.94-1.03 idle; with 1 KiB prefetch 0.94-1.05 and 0.98-1.07
// in all three: not worth a second kernel. Nor in session 15 with the
// prefetch (a kernel reading the quarters as dotQ8_0RowsAVX512's
// session-15 trial did, on PAIRTERMS4 for two rows at a time;
// BenchmarkDotQ8_0Decode, interleaved, per-round ratio medians against
// this kernel at rowsPrefetch): quiet, one thread, 1632 bytes ahead
// 0.97, 2176 1.00, 3264 0.99; while other processes ran (load 1.4-4)
// 1632 0.98-0.99 at one thread and 1.02 at two, 2176 0.98-1.02 and
// 1.01, 3264 0.97 and 1.01, none 0.74. In session 11 (the file's
// matrices in decoding's order, one call each, interleaved, load 3-9)
// it read 0.77-0.79 of a copy of bench's AVX2 probe loop over the same
// bytes (GB per CPU second); in cache (BenchmarkDotQ8_0Rows "2048") it
// runs at 35 GB per CPU second, the AVX-512 kernel at 50. As that
// kernel's, each call forms the previous call's sums during its first
// row (dotRows2SymAsm) rather than at its end.
func dotQ8_0SymRowsAVX2(w []byte, rowBytes int, x []byte, nb int, out []float32) {
	q := symPrepPool.Get().(*symPrep)
	defer symPrepPool.Put(q)
	q.xs = slices.Grow(q.xs[:0], nb)[:nb]
	for b := range nb {
		q.xs[b] = f16At(x[b*BlockBytesQ8_0:])
	}
	var stride int
	q.t, stride = rowTermsN(q.t, nb, 16)
	px, xs := unsafe.Pointer(&x[0]), unsafe.Pointer(&q.xs[0])
	ts := [2]unsafe.Pointer{unsafe.Pointer(&q.t[0]), unsafe.Pointer(&q.t[8*stride])}
	h := len(out) / 2 &^ 3
	var prev, outPrev, outFarPrev unsafe.Pointer
	for r := 0; r < h; r += 4 {
		t := ts[r/4%2]
		dotRows2SymAsm(unsafe.Pointer(&w[r*rowBytes]), h*rowBytes, rowBytes, px, xs, nb, t, 4*stride, rowsPrefetch, prev, outPrev, outFarPrev)
		prev, outPrev, outFarPrev = t, unsafe.Pointer(&out[r]), unsafe.Pointer(&out[h+r])
	}
	if prev != nil {
		sumTermsPairAsm(prev, 4*stride, nb, outPrev, outFarPrev)
	}
	for r := 2 * h; r < len(out); r++ {
		out[r] = dotQ8_0SymAsm(unsafe.Pointer(&w[r*rowBytes]), px, nb)
	}
}

// symPrep is dotQ8_0SymRowsAVX2's scratch: the activation scales as
// float32 and the terms of eight rows.
type symPrep struct{ xs, t []float32 }

var symPrepPool = sync.Pool{New: func() any { return new(symPrep) }}

// rowTerms returns t resized for the two-stream row kernels' terms of
// eight rows, stride terms per row (nb rounded up to a multiple of eight),
// with each row's padding past nb cleared: SUMTERMS adds it.
func rowTerms(t []float32, nb int) ([]float32, int) { return rowTermsN(t, nb, 8) }

// rowTermsN is rowTerms for rows rows of terms.
func rowTermsN(t []float32, nb, rows int) ([]float32, int) {
	stride := (nb + 7) &^ 7
	t = slices.Grow(t[:0], rows*stride)[:rows*stride]
	for r := range rows {
		clear(t[r*stride+nb : (r+1)*stride])
	}
	return t, stride
}

//go:noescape
func sumTermsPairAsm(t unsafe.Pointer, tStride, nb int, out, outFar unsafe.Pointer)

//go:noescape
func dotRows2SymAsm(w unsafe.Pointer, far, rowBytes int, x, xs unsafe.Pointer, nb int, t unsafe.Pointer, tStride, pf int, prev, outPrev, outFarPrev unsafe.Pointer)

//go:noescape
func dotQ8_0SymAsm(w, x unsafe.Pointer, nb int) float32

//go:noescape
func dotQ8_0Asm(w, x unsafe.Pointer, nb int) float32

// quantizeQ8_0AVX2 encodes blocks in assembly until one holds a NaN or
// ±Inf, which the Go encoder takes (ggml's sequential max treats NaN in a
// way a vector max does not).
func quantizeQ8_0AVX2(src []float32, dst []byte) {
	nb := len(src) / BlockQ8_0
	for b := 0; b < nb; {
		b += quantizeQ8_0Asm(unsafe.Pointer(&src[b*BlockQ8_0]), unsafe.Pointer(&dst[b*BlockBytesQ8_0]), nb-b)
		if b < nb {
			quantizeBlockQ8_0((*[BlockQ8_0]float32)(src[b*BlockQ8_0:]), (*[BlockBytesQ8_0]byte)(dst[b*BlockBytesQ8_0:]))
			b++
		}
	}
}

//go:noescape
func quantizeQ8_0Asm(x, y unsafe.Pointer, nb int) int
