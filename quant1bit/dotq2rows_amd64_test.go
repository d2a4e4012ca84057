//go:build !purego

package quant1bit

import (
	"reflect"
	"testing"
)

// TestQ2RowsKernel checks that init chose the AVX-512 rows kernel where
// the AVX-512 Q1_0 kernels run, so that the tests above exercise it.
func TestQ2RowsKernel(t *testing.T) {
	got := reflect.ValueOf(dotQ2_0ActsRows).Pointer()
	want := reflect.ValueOf(dotQ2_0ActsRowsGo).Pointer()
	if hasQuad && kernelSet == "avx512" {
		want = reflect.ValueOf(dotQ2_0ActsRows512).Pointer()
	}
	if got != want {
		t.Errorf("kernel set %s: DotQ2_0ActsRows does not run the expected kernel", kernelSet)
	}
}
