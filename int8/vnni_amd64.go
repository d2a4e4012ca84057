//go:build !purego

package int8

import (
	"slices"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAVXVNNI reports whether the CPU has what the AVX-VNNI kernels
// (vnni_amd64.s) use: AVX2, F16C and the VEX-encoded VPDPBUSD.
var hasAVXVNNI = hasAVX2 && cpu.X86.HasAVXVNNI

// mulQ8_0AVXVNNI is mulQ8_0 with VPDPBUSD: four codes of sixteen rows
// multiplied and added per instruction against a token's four codes
// broadcast, where the AVX2 kernel takes two (VPMADDWD) and then an
// addition. The weights go in as unsigned bytes w+128 (w XOR 0x80), so
// each block sum starts at −128·Σx (setVNNIBatch) and ends exact. The
// batch must have been laid out by setVNNIBatch.
func mulQ8_0AVXVNNI(w []byte, rowBytes, rows int, x *Q8_0Batch, out []float32, outStride int) {
	mulQ8_0Panels(panelPath{layoutBytes, kernelVNNI}, w, rowBytes, rows, x, out, outStride)
}

// layoutBytes lays a piece out for mulQ8_0KernelVNNIAsm (layoutBytesAsm).
func layoutBytes(src []byte, stride, nb int, s *panelScratch) {
	s.bytes = slices.Grow(s.bytes[:0], panelBlocks*panelRows*BlockQ8_0)[:panelBlocks*panelRows*BlockQ8_0]
	_ = src[(panelRows-1)*stride+nb*BlockBytesQ8_0-1]
	layoutBytesAsm(unsafe.Pointer(&src[0]), stride, nb, unsafe.Pointer(&s.bytes[0]), unsafe.Pointer(&s.d[0]))
}

func kernelVNNI(s *panelScratch, x *Q8_0Batch, k0, k1, groups int) {
	mulQ8_0KernelVNNIAsm(unsafe.Pointer(&s.bytes[0]), unsafe.Pointer(&s.d[0]), unsafe.Pointer(&x.xb[k0*BlockQ8_0]), x.stride,
		unsafe.Pointer(&x.d[k0*4]), x.nb, k1-k0, groups, unsafe.Pointer(&s.sums[0]), unsafe.Pointer(&x.xc[k0*4]))
}

// setVNNIBatch lays b's t rows (row i at x[i·xstride:]) out for
// mulQ8_0AVXVNNI: the codes as bytes (b.xb, b.stride bytes a token) and
// per token and block the correction −128·Σx (b.xc, laid out as b.d),
// zero for the padding tokens (prepVNNIAsm; setVNNIBatchGo in the tests
// is its twin).
func setVNNIBatch(b *Q8_0Batch, x []byte, xstride int) {
	tp := (b.t + 3) &^ 3
	b.xb = slices.Grow(b.xb[:0], len(b.x))[:len(b.x)]
	b.xc = slices.Grow(b.xc[:0], tp*b.nb)[:tp*b.nb]
	for i := range tp {
		if i >= b.t {
			clear(b.xb[i*b.stride : (i+1)*b.stride])
			for k := range b.nb {
				b.xc[((i/4)*b.nb+k)*4+i%4] = 0
			}
			continue
		}
		_ = x[i*xstride+b.nb*BlockBytesQ8_0-1]
		prepVNNIAsm(unsafe.Pointer(&x[i*xstride]), b.nb, unsafe.Pointer(&b.xb[i*b.stride]), unsafe.Pointer(&b.xc[(i/4)*b.nb*4+i%4]))
	}
}

// dotQ8_0RowsTokensAVXVNNI is dotQ8_0RowsTokensAVX2 with VPDPBUSD
// forming the block sums (dotRows2MultiVNNIAsm; a token alone takes
// dotQ8_0SymRowsAVX2, as decoding does).
//
// Decoding one token stays AVX2: on the EPYC (Zen 5) with AVX-512 masked,
// dotRows2SymAsm with VPDPBUSD (weights XOR 0x80 against the codes, the
// blocks' 128·Σx subtracted from the sums) ran 1.26x in cache
// (BenchmarkDotQ8_0Rows/2048: 2.06-2.25 against 2.59-2.70 µs, 6
// interleaved rounds, load 2.5-3.5) but read the mapped 700M file level
// (BenchmarkDotQ8_0Decode per-round ratios 0.97-1.04), and run --ids 5
// -n 64 -t 1 took level task-clock (ratios 0.98-1.03 in five of six
// rounds); VPSIGNB, VPABSB and VPDPBUSD instead was 1.10x in cache and
// 0.85-1.01 from the file (six rounds, five of them 0.97-1.01).
func dotQ8_0RowsTokensAVXVNNI(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	byThrees(w, rowBytes, rows, x, xStride, tokens, nb, out, outStride, dotQ8_0SymRowsAVX2, rowsMultiVNNI)
}

func rowsMultiVNNI(w []byte, rowBytes, rows int, x []byte, xStride, tokens, nb int, out []float32, outStride int) {
	rowsMulti2(dotRows2MultiVNNIAsm, w, rowBytes, rows, x, xStride, tokens, nb, out, outStride)
}

//go:noescape
func prepVNNIAsm(x unsafe.Pointer, nb int, xb, xc unsafe.Pointer)

//go:noescape
func dotRows2MultiVNNIAsm(w unsafe.Pointer, far, rowBytes int, xp unsafe.Pointer, nb, tokens int, out, outFar unsafe.Pointer, outStride int, t unsafe.Pointer, tStride, pf int)

//go:noescape
func mulQ8_0KernelVNNIAsm(codes, d, x unsafe.Pointer, xstride int, xd unsafe.Pointer, xdBlocks, nb, groups int, sums, xc unsafe.Pointer)

//go:noescape
func layoutBytesAsm(w unsafe.Pointer, rowBytes, nb int, codes, d unsafe.Pointer)
