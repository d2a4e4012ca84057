package kernels

import (
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
	"github.com/stretchr/testify/require"
)

// TestKernelSet checks that the kernel set bench reports is the one the
// CPU and the build select: the F16 products take zmm registers where
// AVX-512 F, BW and VL are all present.
func TestKernelSet(t *testing.T) {
	require.Equal(t, blocks.KernelSet(puregoBuild, true), KernelSet())
}
