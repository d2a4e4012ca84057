// Package cpuvendor tells which company made the CPU, for kernels whose
// fastest memory access pattern differs between vendors (software
// prefetch, how many streams a decoding row kernel reads) while their
// results do not. golang.org/x/sys/cpu reports instruction sets, not the
// vendor.
package cpuvendor

// Intel reports whether CPUID's vendor string is GenuineIntel; false on
// other CPUs and architectures.
var Intel = intel()
