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
	case "avx2+avx512vnni":
		want = reflect.ValueOf(dotQ2_0ActsRowsEVNNI).Pointer()
	}
	if got != want {
		t.Errorf("kernel set %s: DotQ2_0ActsRows does not run the expected kernel", kernelSet)
	}
}

// q2RowsKernels are the Q2_0 rows kernels on the AVX2 layout
// (Acts.bq2), with the features each needs besides AVX2 and F16C.
var q2RowsKernels = []struct {
	name string
	has  bool
	f    func([]byte, int, int, []Acts, []float32, int, int)
}{
	{"avx2", true, dotQ2_0ActsRowsAVX2},
	{"avx2+avxvnni", hasVNNI, dotQ2_0ActsRowsVNNI},
	{"avx2+avx512vnni", hasEVNNI, dotQ2_0ActsRowsEVNNI},
}

// eachQ2RowsKernel calls f with each of q2RowsKernels that the CPU runs
// as DotQ2_0ActsRows' kernel and returns the names of the kernels it
// skipped.
func eachQ2RowsKernel(f func(name string)) (skipped []string) {
	if kernelSet == "go" {
		return nil
	}
	for _, k := range q2RowsKernels {
		if !k.has {
			skipped = append(skipped, k.name)
			continue
		}
		rows := dotQ2_0ActsRows
		dotQ2_0ActsRows = k.f
		f(k.name)
		dotQ2_0ActsRows = rows
	}
	return skipped
}

// TestQ2RowsAVX2 keeps the AVX2 rows kernels (plain, AVX-VNNI and its
// EVEX twin) tested where init chose another: the rows tests again with
// each.
func TestQ2RowsAVX2(t *testing.T) {
	if kernelSet == "go" {
		t.Skip("no AVX2 kernels")
	}
	skipped := eachQ2RowsKernel(func(name string) {
		t.Run(name, func(t *testing.T) {
			TestDotQ2_0ActsRows(t)
			TestDotQ2_0ActsRowsSpecial(t)
		})
	})
	for _, name := range skipped {
		t.Run(name, func(t *testing.T) { t.Skip("the CPU lacks this kernel's instructions") })
	}
}
