package kernels

import (
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/cpu"
)

// TestKernelSet checks that the kernel set bench reports is the one the
// CPU and the build select: the F16 products take zmm registers where
// AVX-512 F, BW and VL are all present.
func TestKernelSet(t *testing.T) {
	x := cpu.X86
	var want string
	switch {
	case goruntime.GOARCH != "amd64" || puregoBuild || !x.HasAVX2 || !x.HasF16C:
		want = "go"
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL:
		want = "avx512"
	default:
		want = "avx2"
	}
	require.Equal(t, want, KernelSet())
}
