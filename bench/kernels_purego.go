//go:build purego

package bench

// Kernels names the kernel build: "asm" selects AVX2 assembly where the
// CPU has it, "purego" (build tag purego) the Go reference versions.
const Kernels = "purego"
