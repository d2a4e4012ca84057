//go:build !purego

package int8

import (
	"slices"
	"sync"
	"unsafe"
)

func init() {
	switch {
	case hasAVX512:
		dotQ8_0SymRowsTokens = dotQ8_0RowsTokensAVX512
	case hasAVXVNNI:
		dotQ8_0SymRowsTokens = dotQ8_0RowsTokensAVXVNNI
	case hasAVX2:
		dotQ8_0SymRowsTokens = dotQ8_0RowsTokensAVX2
	}
}

// multiPrep is up to three activation rows laid out for the multi-token
// kernels (multi512_amd64.s describes the records), and t their scratch
// for the terms of eight rows.
type multiPrep struct {
	buf []byte
	p   []byte // buf from a 64-byte boundary
	t   []float32
}

var multiPrepPool = sync.Pool{New: func() any { return new(multiPrep) }}

// set prepares the tokens (at most three) rows of nb blocks, xStride
// bytes apart in x.
func (q *multiPrep) set(x []byte, xStride, tokens, nb int) {
	g := nb / 8
	p := q.alloc(g*960 + nb%8*120)
	tail := unsafe.Add(p, g*960)
	for k := range tokens {
		prepMultiAsm(unsafe.Pointer(&x[k*xStride]), nb, unsafe.Add(p, 256*k), unsafe.Add(p, 768+32*k),
			unsafe.Add(tail, 32*k), unsafe.Add(tail, 96+4*k))
	}
}

// setAVX2 is set for the AVX2 kernel's records (multi2_amd64.s).
func (q *multiPrep) setAVX2(x []byte, xStride, tokens, nb int) {
	g := nb / 8
	p := q.alloc(g*864 + nb%8*128)
	tail := unsafe.Add(p, g*864)
	for k := range tokens {
		prepMulti2Asm(unsafe.Pointer(&x[k*xStride]), nb, unsafe.Add(p, 256*k), unsafe.Add(p, 768+32*k),
			unsafe.Add(tail, 32*k), unsafe.Add(tail, 96+4*k))
	}
}

// alloc sizes q.p to n bytes from a 64-byte boundary and returns it.
func (q *multiPrep) alloc(n int) unsafe.Pointer {
	q.buf = slices.Grow(q.buf[:0], n+64)[:n+64]
	off := -int(uintptr(unsafe.Pointer(&q.buf[0]))) & 63
	q.p = q.buf[off : off+n]
	return unsafe.Pointer(&q.p[0])
}

// terms sizes q.t for eight rows of terms of nb blocks (⌈nb/8⌉ groups of
// three tokens' eight) and returns the row stride in bytes, with each
// row's last group cleared: the kernels' sums add its slots past nb.
func (q *multiPrep) terms(nb int) int {
	stride := (nb + 7) / 8 * 24
	q.t = slices.Grow(q.t[:0], 8*stride)[:8*stride]
	for r := range 8 {
		clear(q.t[(r+1)*stride-24 : (r+1)*stride])
	}
	return 4 * stride
}

// dotQ8_0RowsTokensAVX512 takes the tokens three or two at a time (one
// alone: dotQ8_0RowsAVX512), their rows prepared once per call, and
// reads the weight rows as dotQ8_0RowsAVX512 does (two streams far
// apart, four rows of each per kernel call, the same prefetch), each
// group of a row loaded, XORed, permuted and its scales gathered once
// for all the tokens. On the EPYC (Zen 5), BenchmarkDotQ8_0RowsTokens,
// CPU time, 6 interleaved rounds, load 4-5: over the mapped 700M Q8_0
// file in 2048-row calls, 2 tokens 32.5 ms against 41.9 for the row
// kernel per token over 256 KiB blocks (per-round ratios 1.25-1.43), 3
// tokens 34.1 against 59.8 (1.55-1.98), one token alone 25.6; in cache
// (48 rows) 2.8 against 4.0 µs and 3.4 against 5.9. Per-token reduction
// (MREDUCE) instead of MPERM: 3 tokens 3.8 µs in cache, 36.6 ms over the
// file.
func dotQ8_0RowsTokensAVX512(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	byThrees(w, rowBytes, rows, x, xStride, tokens, nb, out, outStride, dotQ8_0RowsAVX512, rowsMultiAVX512)
}

// byThrees runs multi on the tokens three or two at a time and one on a
// token left alone.
func byThrees(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int,
	one func(w []byte, rowBytes int, x []byte, nb int, out []float32),
	multi func(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int)) {
	for k0 := 0; k0 < tokens; k0 += 3 {
		c := min(3, tokens-k0)
		xk, ok := x[k0*xStride:], out[k0*outStride:]
		if c == 1 {
			one(w, rowBytes, xk, nb, ok[:rows])
			continue
		}
		multi(w, rowBytes, rows, xk, xStride, c, nb, ok, outStride)
	}
}

func rowsMultiAVX512(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	q := multiPrepPool.Get().(*multiPrep)
	defer multiPrepPool.Put(q)
	q.set(x, xStride, tokens, nb)
	tStride := q.terms(nb)
	xp, t := unsafe.Pointer(&q.p[0]), unsafe.Pointer(&q.t[0])
	h := rows / 2 &^ 3
	for r := 0; r < h; r += 4 {
		dotRows2MultiAsm(unsafe.Pointer(&w[r*rowBytes]), h*rowBytes, rowBytes, xp, nb, tokens,
			unsafe.Pointer(&out[r]), unsafe.Pointer(&out[h+r]), 4*outStride, t, tStride, rowsPrefetch)
	}
	for r := 2 * h; r < rows; r += 8 {
		dotRowsMultiAsm(unsafe.Pointer(&w[r*rowBytes]), rowBytes, xp, nb, tokens,
			unsafe.Pointer(&out[r]), 4*outStride, min(8, rows-r), t, tStride)
	}
}

// dotQ8_0RowsTokensAVX2 is dotQ8_0RowsTokensAVX512 for AVX2
// (multi2_amd64.s): the tokens three or two at a time (one alone:
// dotQ8_0SymRowsAVX2), the weight rows read as dotQ8_0SymRowsAVX2 reads
// them, each group of a row loaded, permuted, its absolute values taken
// and its scales gathered once for all the tokens. Without VNNI each
// token still costs VPSIGNB, VPMADDUBSW and VPMADDWD per 32 codes, so it
// gains less than the AVX-512 kernel. On the EPYC (Zen 5) with AVX-512
// masked (GODEBUG=cpu.avx512f=off), BenchmarkDotQ8_0RowsTokens, CPU
// time, 6 interleaved rounds, load 2: over the mapped 700M Q8_0 file in
// 2048-row calls, 2 tokens 35.5-38.4 ms against 45.2-49.9 for the row
// kernel per token over 256 KiB blocks (per-round ratios 1.24-1.34), 3
// tokens 45.2-48.3 against 65.9-70.1 (1.38-1.55); in cache (48 rows)
// 4.4-4.7 against 5.2-5.5 µs (1.15-1.20) and 5.6-6.1 against 7.6-8.2
// (1.33-1.38). Prefetching 4352 bytes ahead read level with none there.
func dotQ8_0RowsTokensAVX2(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	byThrees(w, rowBytes, rows, x, xStride, tokens, nb, out, outStride, dotQ8_0SymRowsAVX2, rowsMultiAVX2)
}

func rowsMultiAVX2(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	rowsMulti2(dotRows2Multi2Asm, w, rowBytes, rows, x, xStride, tokens, nb, out, outStride)
}

// rowsMulti2 is rowsMultiAVX2 with the kernel rows2 (dotRows2Multi2Asm's
// contract).
func rowsMulti2(rows2 func(w unsafe.Pointer, far, rowBytes int, xp unsafe.Pointer, nb, tokens int, out, outFar unsafe.Pointer, outStride int, t unsafe.Pointer, tStride, pf int),
	w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	q := multiPrepPool.Get().(*multiPrep)
	defer multiPrepPool.Put(q)
	q.setAVX2(x, xStride, tokens, nb)
	tStride := q.terms(nb)
	xp, t := unsafe.Pointer(&q.p[0]), unsafe.Pointer(&q.t[0])
	h := rows / 2 &^ 3
	for r := 0; r < h; r += 4 {
		rows2(unsafe.Pointer(&w[r*rowBytes]), h*rowBytes, rowBytes, xp, nb, tokens,
			unsafe.Pointer(&out[r]), unsafe.Pointer(&out[h+r]), 4*outStride, t, tStride, rowsPrefetch)
	}
	// The last rows (fewer than eight) one by one, token by token, as
	// dotQ8_0SymRowsAVX2 takes them.
	for r := 2 * h; r < rows; r++ {
		for k := range tokens {
			out[k*outStride+r] = dotQ8_0SymAsm(unsafe.Pointer(&w[r*rowBytes]), unsafe.Pointer(&x[k*xStride]), nb)
		}
	}
}

//go:noescape
func prepMulti2Asm(x unsafe.Pointer, nb int, codes, scales, tcodes, tscales unsafe.Pointer)

//go:noescape
func dotRows2Multi2Asm(w unsafe.Pointer, far, rowBytes int, xp unsafe.Pointer, nb, tokens int, out, outFar unsafe.Pointer, outStride int, t unsafe.Pointer, tStride, pf int)

//go:noescape
func prepMultiAsm(x unsafe.Pointer, nb int, codes, cs, tcodes, tcs unsafe.Pointer)

//go:noescape
func dotRows2MultiAsm(w unsafe.Pointer, far, rowBytes int, xp unsafe.Pointer, nb, tokens int, out, outFar unsafe.Pointer, outStride int, t unsafe.Pointer, tStride, pf int)

//go:noescape
func dotRowsMultiAsm(w unsafe.Pointer, rowBytes int, xp unsafe.Pointer, nb, tokens int, out unsafe.Pointer, outStride, rows int, t unsafe.Pointer, tStride int)
