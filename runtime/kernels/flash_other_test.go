package kernels

// flashAsmKernels are the assembly forms of FlashF16 this CPU runs (set
// in flash_amd64_test.go).
var flashAsmKernels []namedFlash
