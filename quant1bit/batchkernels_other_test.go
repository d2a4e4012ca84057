//go:build purego || !amd64

package quant1bit

// eachBatchKernel calls f once, with the batch kernel init chose (the Go
// one): there are no others.
func eachBatchKernel(f func(name string)) (skipped []string) {
	f(kernelSet)
	return nil
}
