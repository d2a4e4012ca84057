//go:build !purego

package quant1bit

import (
	"reflect"
	"testing"
)

// TestQ2RowsKernel checks that init chose the AVX-512 rows kernel where
// the AVX-512 Q1_0 kernels run and the AVX2 one elsewhere, so that the
// tests above exercise it.
func TestQ2RowsKernel(t *testing.T) {
	got := reflect.ValueOf(dotQ2_0ActsRows).Pointer()
	want := reflect.ValueOf(dotQ2_0ActsRowsGo).Pointer()
	switch kernelSet {
	case "avx512":
		want = reflect.ValueOf(dotQ2_0ActsRows512).Pointer()
	case "avx2":
		want = reflect.ValueOf(dotQ2_0ActsRowsAVX2).Pointer()
	case "avx2+avxvnni":
		want = reflect.ValueOf(dotQ2_0ActsRowsVNNI).Pointer()
	}
	if got != want {
		t.Errorf("kernel set %s: DotQ2_0ActsRows does not run the expected kernel", kernelSet)
	}
}

// TestQ2RowsAVX2 keeps the AVX2 rows kernels (plain and AVX-VNNI) tested
// where init chose another: the rows tests again with each, Acts filling
// the AVX2 layout too.
func TestQ2RowsAVX2(t *testing.T) {
	if kernelSet == "go" {
		t.Skip("no AVX2 kernels")
	}
	for _, k := range []struct {
		name string
		has  bool
		f    func([]byte, int, int, []Acts, []float32, int, int)
	}{{"avx2", true, dotQ2_0ActsRowsAVX2}, {"avx2+avxvnni", hasVNNI, dotQ2_0ActsRowsVNNI}} {
		t.Run(k.name, func(t *testing.T) {
			if !k.has {
				t.Skip("the CPU lacks this kernel's instructions")
			}
			rows, layout := dotQ2_0ActsRows, q2Layout
			defer func() { dotQ2_0ActsRows, q2Layout = rows, layout }()
			dotQ2_0ActsRows, q2Layout = k.f, true
			TestDotQ2_0ActsRows(t)
			TestDotQ2_0ActsRowsSpecial(t)
		})
	}
}
