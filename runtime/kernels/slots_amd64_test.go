//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

func init() {
	if cpu.X86.HasAVX2 {
		slotKernels = append(slotKernels, slotKernel{"avx2", axpySlotsAVX2})
		scoreSlotKernels = append(scoreSlotKernels, scoreSlotKernel{"avx2", dotRowsSlotsAVX2})
		headSlotKernels = append(headSlotKernels, headSlotKernel{"avx2", dotHeadsSlotsAVX2})
	}
	if cpu.X86.HasAVX2 && hasAVX512 {
		slotKernels = append(slotKernels, slotKernel{"avx512", axpySlotsAVX512})
	}
}
