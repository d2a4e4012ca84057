package kernels

import (
	goruntime "runtime"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestKernelSet checks that the kernel set bench reports is the one the
// CPU and the build select.
func TestKernelSet(t *testing.T) {
	want := "go"
	if goruntime.GOARCH == "amd64" && !puregoBuild && cpu.X86.HasAVX2 && cpu.X86.HasF16C {
		want = "avx2"
		if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL {
			want = "avx512"
		}
	}
	if got := KernelSet(); got != want {
		t.Errorf("KernelSet() = %q, want %q", got, want)
	}
}
