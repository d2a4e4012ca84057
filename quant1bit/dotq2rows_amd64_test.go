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
	case "avx2", "avx2+avxvnni":
		want = reflect.ValueOf(dotQ2_0ActsRowsAVX2).Pointer()
	}
	if got != want {
		t.Errorf("kernel set %s: DotQ2_0ActsRows does not run the expected kernel", kernelSet)
	}
}

// TestQ2RowsAVX2 keeps the AVX2 rows kernel tested on AVX-512 CPUs: the
// rows tests again with it, Acts filling both layouts.
func TestQ2RowsAVX2(t *testing.T) {
	if kernelSet != "avx512" {
		t.Skip("the AVX2 kernel is the one in use, or none")
	}
	rows, layout := dotQ2_0ActsRows, q2Layout
	defer func() { dotQ2_0ActsRows, q2Layout = rows, layout }()
	dotQ2_0ActsRows, q2Layout = dotQ2_0ActsRowsAVX2, true
	TestDotQ2_0ActsRows(t)
	TestDotQ2_0ActsRowsSpecial(t)
}
