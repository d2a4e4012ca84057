//go:build purego || !amd64

package quant1bit

// eachBatchKernel calls f once, with the batch kernel init chose (the Go
// one): there are no others.
func eachBatchKernel(f func(name string)) (skipped []string) {
	f(kernelSet)
	return nil
}

// eachQ2RowsKernel calls nothing: init's choice is the only Q2_0 rows
// kernel.
func eachQ2RowsKernel(f func(name string)) (skipped []string) { return nil }
