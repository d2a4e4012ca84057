package quant1bit

import (
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/cpu"
)

// TestKernelSet checks that KernelSet names the kernels the CPU and the
// build select: AVX-512 needs VBMI, VNNI and BITALG besides F, BW and VL,
// the AVX2 kernels F16C, and without AVX-512 AVX-VNNI adds its kernel,
// or failing that AVX512_VNNI with F and VL its EVEX twin.
func TestKernelSet(t *testing.T) {
	x := cpu.X86
	want := blocks.KernelSet(puregoBuild, x.HasAVX512VBMI && x.HasAVX512VNNI && x.HasAVX512BITALG)
	switch {
	case want != "avx2":
	case x.HasAVXVNNI:
		want = "avx2+avxvnni"
	case x.HasAVX512F && x.HasAVX512VL && x.HasAVX512VNNI:
		want = "avx2+avx512vnni"
	}
	assert.Equal(t, want, KernelSet())
}
