package quant1bit

import (
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/cpu"
)

// TestKernelSet checks that KernelSet names the kernels the CPU and the
// build select: AVX-512 needs BW, VL, VBMI, VNNI and BITALG besides F,
// the AVX2 kernels F16C.
func TestKernelSet(t *testing.T) {
	x := cpu.X86
	var want string
	switch {
	case goruntime.GOARCH != "amd64" || puregoBuild || !x.HasAVX2 || !x.HasF16C:
		want = "go"
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VBMI && x.HasAVX512VNNI && x.HasAVX512BITALG:
		want = "avx512"
	default:
		want = "avx2"
	}
	assert.Equal(t, want, KernelSet())
}
