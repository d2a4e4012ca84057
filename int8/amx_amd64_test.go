//go:build !purego

package int8

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/cpu"
)

// TestAMXSelected checks that on a CPU with AMX-TILE and AMX-INT8 (and the
// AVX-512 the epilogue uses) the kernel granted the tile state and the
// AMX product is selected and reported; elsewhere it says it is skipped.
// MulQ8_0's table and fuzz tests compare it with DotQ8_0 when it runs.
func TestAMXSelected(t *testing.T) {
	if !hasAVX512 || !cpu.X86.HasAMXTile || !cpu.X86.HasAMXInt8 {
		require.False(t, amxUsable())
		t.Skip("no AMX-TILE, AMX-INT8 or AVX-512 VNNI here: the AMX kernel is not tested")
	}
	if !amxUsable() {
		// A kernel before Linux 5.16 (or a seccomp policy) refuses the tile
		// state; then the AVX-512 kernels run, which the other tests cover.
		require.NotContains(t, KernelSet(), "amx")
		t.Skip("the CPU has AMX but arch_prctl(ARCH_REQ_XCOMP_PERM) refused the tile state: the AMX kernel is not tested")
	}
	require.Contains(t, mulImpls(), "avx512+amx")
	require.Equal(t, "avx512+amx", KernelSet())

	// A batch of 16 tokens is laid out for the tiles, a smaller one not.
	x := make([]byte, 16*BlockBytesQ8_0)
	var b Q8_0Batch
	b.Set(x, BlockBytesQ8_0, 16, BlockQ8_0)
	require.Len(t, b.xa, 512)
	b.Set(x, BlockBytesQ8_0, 15, BlockQ8_0)
	require.Empty(t, b.xa)
}
