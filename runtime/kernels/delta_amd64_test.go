//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

func init() {
	if cpu.X86.HasAVX2 {
		deltaKernels = append(deltaKernels, deltaKernel{"avx2", deltaRetrieveAVX2, deltaUpdateAVX2})
	}
	if cpu.X86.HasAVX2 && hasAVX512 {
		deltaKernels = append(deltaKernels, deltaKernel{"avx512", deltaRetrieveAVX512, deltaUpdateAVX512})
	}
}
