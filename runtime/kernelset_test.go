package runtime

import (
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/qnnprep/qnnprep/int8"
	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// TestKernelSet checks that the kernel set bench reports names what each
// kernel package selects on this CPU and build: one name when the
// packages agree, else each package's.
func TestKernelSet(t *testing.T) {
	x := cpu.X86
	// Each package's extra AVX-512 needs beyond F, BW and VL.
	sets := []struct{ pkg, want string }{
		{"int8", avxVNNI(blocks.KernelSet(puregoBuild, x.HasAVX512VNNI), false) + int8AMX()},
		{"quant1bit", avxVNNI(blocks.KernelSet(puregoBuild, x.HasAVX512VNNI && x.HasAVX512VBMI && x.HasAVX512BITALG), true)},
		{"kernels", blocks.KernelSet(puregoBuild, true)},
	}
	want := sets[0].want
	var each []string
	for _, s := range sets {
		each = append(each, s.pkg+" "+s.want)
		if s.want != sets[0].want {
			want = ""
		}
	}
	if want == "" {
		want = strings.Join(each, ", ")
	}
	if got := KernelSet(); got != want {
		t.Errorf("KernelSet() = %q, want %q", got, want)
	}
}

// int8AMX is "+amx" when int8's prompt products use AMX (its own
// TestAMXSelected checks that they do on every CPU that has it).
func int8AMX() string {
	if strings.HasSuffix(int8.KernelSet(), "+amx") {
		return "+amx"
	}
	return ""
}

// avxVNNI is set with "+avxvnni" when a package (int8, quant1bit) takes
// its AVX-VNNI kernels instead of plain AVX2 ones (on CPUs with AVX-VNNI
// and no AVX-512 in use); with evex (quant1bit) "+avx512vnni" when it
// takes their EVEX twins instead (no AVX-VNNI, AVX512_VNNI with F and
// VL).
func avxVNNI(set string, evex bool) string {
	x := cpu.X86
	switch {
	case set != "avx2":
	case x.HasAVXVNNI:
		return set + "+avxvnni"
	case evex && x.HasAVX512F && x.HasAVX512VL && x.HasAVX512VNNI:
		return set + "+avx512vnni"
	}
	return set
}
