package int8

// kernelSet is what KernelSet reports; the assembly init sets it.
var kernelSet = "go"

// KernelSet names the instruction set of this package's kernels on this
// CPU: "avx512+amx" ("avx512" whose prompt products of 16 tokens and more
// take AMX-INT8, on CPUs that have it once Linux grants the tile state),
// "avx512" (AVX-512 F, BW, VL and VNNI, with AVX2 and F16C: prompt
// products and decoding's many-rows kernel take AVX-512, single dot
// products and quantization stay AVX2), "avx2+avxvnni" ("avx2" whose
// prompt products and 2-3-token decoding kernel take the VEX-encoded
// AVX-VNNI VPDPBUSD, on CPUs that have it without the AVX-512 set above:
// Intel Alder Lake and later client cores; one-token decoding stays
// AVX2), "avx2" (AVX2 and F16C), or "go" for the Go reference versions
// (neither, another architecture, or the purego build tag).
func KernelSet() string { return kernelSet }
