package runtime

import (
	goruntime "runtime"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestKernelSet checks that the kernel set bench reports names what each
// kernel package selects on this CPU and build: one name when the
// packages agree, else each package's.
func TestKernelSet(t *testing.T) {
	asm := goruntime.GOARCH == "amd64" && !puregoBuild
	x := cpu.X86
	avx2 := asm && x.HasAVX2 && x.HasF16C
	avx512 := avx2 && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI
	set := func(avx512ok bool) string {
		switch {
		case avx512ok && avx512:
			return "avx512"
		case avx2:
			return "avx2"
		}
		return "go"
	}
	// runtime/kernels' F16 kernels need AVX-512 F, BW and VL only.
	kernelsSet := set(false)
	if avx2 && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL {
		kernelsSet = "avx512"
	}
	// Per package: whether it has AVX-512 kernels for this CPU (quant1bit's
	// also need VBMI and BITALG).
	sets := []struct{ pkg, want string }{
		{"int8", set(true)},
		{"quant1bit", set(x.HasAVX512VBMI && x.HasAVX512BITALG)},
		{"kernels", kernelsSet},
	}
	want := sets[0].want
	for _, s := range sets {
		if s.want != sets[0].want {
			want = ""
			for i, s := range sets {
				if i > 0 {
					want += ", "
				}
				want += s.pkg + " " + s.want
			}
			break
		}
	}
	if got := KernelSet(); got != want {
		t.Errorf("KernelSet() = %q, want %q", got, want)
	}
}
