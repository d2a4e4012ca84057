package int8

import (
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
	"golang.org/x/sys/cpu"
)

// TestKernelSet checks that KernelSet names the kernels the CPU and the
// build select: AVX-512 needs VNNI besides F, BW and VL.
func TestKernelSet(t *testing.T) {
	if got, want := KernelSet(), blocks.KernelSet(puregoBuild, cpu.X86.HasAVX512VNNI); got != want {
		t.Errorf("KernelSet() = %q, want %q", got, want)
	}
}
