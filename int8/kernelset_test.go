package int8

import (
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
	"golang.org/x/sys/cpu"
)

// TestKernelSet checks that KernelSet names the kernels the CPU and the
// build select: AVX-512 needs VNNI besides F, BW and VL, and "+amx" says
// the prompt products use AMX (TestAMXSelected checks when they must);
// "+avxvnni" the AVX-VNNI kernels, taken instead of plain AVX2 ones.
func TestKernelSet(t *testing.T) {
	want := blocks.KernelSet(puregoBuild, cpu.X86.HasAVX512VNNI)
	if want == "avx2" && cpu.X86.HasAVXVNNI {
		want += "+avxvnni"
	}
	if amxSelected() {
		want += "+amx"
	}
	if got := KernelSet(); got != want {
		t.Errorf("KernelSet() = %q, want %q", got, want)
	}
}
