package int8

import (
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestKernelSet checks that KernelSet names the kernels the CPU and the
// build select.
func TestKernelSet(t *testing.T) {
	want := "go"
	if runtime.GOARCH == "amd64" && !puregoBuild {
		switch x := cpu.X86; {
		case x.HasAVX2 && x.HasF16C && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI:
			want = "avx512"
		case x.HasAVX2 && x.HasF16C:
			want = "avx2"
		}
	}
	if got := KernelSet(); got != want {
		t.Errorf("KernelSet() = %q, want %q", got, want)
	}
}
