//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

func init() {
	// The F16 and BF16 kernels are selected with FMA (kernels_amd64.go).
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C && cpu.X86.HasFMA {
		f16Fmt.muls = append(f16Fmt.muls, mulF16Kernel{"avx2", mulF16AVX2})
		bf16Fmt.muls = append(bf16Fmt.muls, mulF16Kernel{"avx2", mulBF16AVX2})
		f16Fmt.add("avx2", dotF16F32AVX2, dotF16F32RowsAVX2, dotF16F32RowsAsm, dotF16F32Rows4Asm, dotF16F32RowsEach, dotF16F32RowsMultiAVX2)
		bf16Fmt.add("avx2", dotBF16F32AVX2, dotBF16F32RowsAVX2, dotBF16F32RowsAsm, dotBF16F32Rows4Asm, dotBF16F32RowsEach, dotBF16F32RowsMultiAVX2)
		if hasAVX512 {
			f16Fmt.muls = append(f16Fmt.muls, mulF16Kernel{"avx512", mulF16AVX512})
			bf16Fmt.muls = append(bf16Fmt.muls, mulF16Kernel{"avx512", mulBF16AVX512})
			f16Fmt.add("avx512", dotF16F32AVX512, dotF16F32RowsAVX512, dotF16F32RowsAsm512, dotF16F32Rows4Asm512, dotF16F32RowsEach, dotF16F32RowsMultiAVX512)
			// BF16 has no AVX-512 single dot product: the AVX2 one serves.
			bf16Fmt.add("avx512", dotBF16F32AVX2, dotBF16F32RowsAVX512, dotBF16F32RowsAsm512, dotBF16F32Rows4Asm512, dotBF16F32RowsEach, dotBF16F32RowsMultiAVX512)
		}
	}
}

// add registers a set's kernels of f: the dot and rows kernels, the
// decoding rows kernels with two and with four streams (whichever
// rows4Streams selects), and the multi-token kernel.
func (f *format) add(set string, dot func(w []uint16, x []float32) float32, rows rowsEachFunc, pair, quad rowsAsm, each rowsEachFunc, multi multiKernelFunc) {
	f.kernels = append(f.kernels, setKernel{set, dot, rows})
	f.streams = append(f.streams,
		rowsKernel{set + "/2streams", func(w []byte, rowBytes int, x, out []float32) { rowsCall(pair, each, w, rowBytes, x, out) }},
		rowsKernel{set + "/4streams", func(w []byte, rowBytes int, x, out []float32) { quadsCall(quad, pair, each, w, rowBytes, x, out) }})
	f.multis = append(f.multis, multiKernel{set, multi})
}
