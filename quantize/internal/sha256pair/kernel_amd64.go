//go:build amd64 && !purego

package sha256pair

import "golang.org/x/sys/cpu"

// haveKernel reports SHA-NI (CPUID.7.0:EBX bit 29) with the SSE levels
// the kernel uses.
var haveKernel = func() bool {
	_, ebx, _, _ := cpuid(7, 0)
	return ebx&(1<<29) != 0 && cpu.X86.HasSSE41 && cpu.X86.HasSSSE3
}()

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// blocks2 compresses nb ≥ 1 blocks of pa into ha and of pb into hb, the
// two streams' rounds interleaved.
func blocks2(ha, hb *[8]uint32, pa, pb []byte, nb int) {
	_, _ = pa[nb*64-1], pb[nb*64-1]
	blocks2Asm(ha, hb, &pa[0], &pb[0], nb)
}

//go:noescape
func blocks2Asm(ha, hb *[8]uint32, pa, pb *byte, nb int)
