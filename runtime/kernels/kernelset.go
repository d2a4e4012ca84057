package kernels

// kernelSet is what KernelSet reports; the assembly init sets it.
var kernelSet = "go"

// KernelSet names the instruction set this package's dot-product kernels
// use on this CPU: "avx512" (AVX-512 F, BW and VL: the F16 products in
// zmm registers, the rest as with AVX2), "avx2", or "go" for the Go
// reference versions (no AVX2 and F16C, another architecture, or the
// purego build tag). All three give the same bits.
func KernelSet() string { return kernelSet }
