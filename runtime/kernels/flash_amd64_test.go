//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

func init() {
	x := cpu.X86
	if x.HasAVX2 && x.HasF16C && x.HasFMA {
		flashAsmKernels = append(flashAsmKernels, namedFlash{"avx2", flashF16AVX2})
		if hasAVX512 {
			flashAsmKernels = append(flashAsmKernels, namedFlash{"avx512", flashF16AVX512})
		}
	}
}
