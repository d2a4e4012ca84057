//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

func init() {
	type kernel = struct {
		name string
		dot  func(w []uint16, x []float32) float32
		rows func(w []byte, rowBytes int, x, out []float32)
	}
	// The F16 kernels are selected with FMA (kernels_amd64.go).
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C && cpu.X86.HasFMA {
		mulF16Kernels = append(mulF16Kernels, mulF16Kernel{"avx2", mulF16AVX2})
		f16F32Kernels = append(f16F32Kernels, kernel{"avx2", dotF16F32AVX2, dotF16F32RowsAVX2})
		f16F32Rows = append(f16F32Rows, streamsKernels("avx2", dotF16F32RowsAsm, dotF16F32Rows4Asm)...)
		f16F32Multi = append(f16F32Multi, multiKernel{"avx2", dotF16F32RowsMultiAVX2})
		if hasAVX512 {
			mulF16Kernels = append(mulF16Kernels, mulF16Kernel{"avx512", mulF16AVX512})
			f16F32Kernels = append(f16F32Kernels, kernel{"avx512", dotF16F32AVX512, dotF16F32RowsAVX512})
			f16F32Rows = append(f16F32Rows, streamsKernels("avx512", dotF16F32RowsAsm512, dotF16F32Rows4Asm512)...)
			f16F32Multi = append(f16F32Multi, multiKernel{"avx512", dotF16F32RowsMultiAVX512})
		}
	}
}

// streamsKernels returns a set's decoding row kernels with two and with
// four streams, whichever rows4Streams selects.
func streamsKernels(set string, pair, quad rowsAsm) []rowsKernel {
	return []rowsKernel{
		{set + "/2streams", func(w []byte, rowBytes int, x, out []float32) { rowsCall(pair, w, rowBytes, x, out) }},
		{set + "/4streams", func(w []byte, rowBytes int, x, out []float32) { quadsCall(quad, pair, w, rowBytes, x, out) }},
	}
}
