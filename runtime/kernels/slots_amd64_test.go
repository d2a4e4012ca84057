//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

func init() {
	if cpu.X86.HasAVX2 {
		slotKernels = append(slotKernels, slotKernel{"avx2", axpySlotsAVX2})
	}
	if cpu.X86.HasAVX2 && hasAVX512 {
		slotKernels = append(slotKernels, slotKernel{"avx512", axpySlotsAVX512})
	}
}
