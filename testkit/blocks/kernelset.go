package blocks

import (
	"runtime"

	"golang.org/x/sys/cpu"
)

// KernelSet returns the kernel set a kernel package's KernelSet must name
// on this CPU and build: "go" in a purego build, off amd64 or without
// AVX2 and F16C; "avx512" where AVX-512 F, BW and VL are present and
// avx512, the package's further AVX-512 needs, holds; else "avx2".
func KernelSet(purego, avx512 bool) string {
	x := cpu.X86
	switch {
	case runtime.GOARCH != "amd64" || purego || !x.HasAVX2 || !x.HasF16C:
		return "go"
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && avx512:
		return "avx512"
	}
	return "avx2"
}
