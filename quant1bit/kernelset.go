package quant1bit

// kernelSet is what KernelSet reports; the assembly init sets it.
var kernelSet = "go"

// KernelSet names the instruction set this package's dot-product kernels
// use on this CPU: "avx512" when the Q1_0 kernels for prepared
// activations (DotQ1_0ActsBatch, DotQ1_0ActsRows, which decoding and
// prompts run on) use AVX-512 (BW, VL, VBMI, VNNI, BITALG) and the others
// AVX2, "avx2+avxvnni" when those use AVX-VNNI (the 256-bit VEX VPDPBUSD
// of Intel client CPUs without AVX-512) and the others AVX2,
// "avx2+avx512vnni" when they use the same kernels with the EVEX
// VPDPBUSD (AVX512_VNNI and VL: Intel Xeons without VBMI and BITALG, such
// as Cascade Lake and Cooper Lake), "avx2", or
// "go" for the Go reference versions (no AVX2 and F16C, another
// architecture, or the purego build tag).
func KernelSet() string { return kernelSet }
