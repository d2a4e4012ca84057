//go:build !purego

package quant1bit

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/cpubench"
	"golang.org/x/sys/cpu"
)

// batchKernels are the batch kernels with the features each needs,
// besides AVX2 and F16C.
var batchKernels = []struct {
	name  string
	kind  batchKind
	has   bool
	batch func([]byte, []Acts, []float32, int, int)
	rows  func([]byte, int, int, []Acts, []float32, int, int)
}{
	{"avx2", kindAVX2, true, dotQ1_0ActsBatchAVX2, dotQ1_0ActsRowsAVX2},
	{"avx2+avxvnni", kindVNNI, hasVNNI, dotQ1_0ActsBatchVNNI, dotQ1_0ActsRowsVNNI},
	{"avx2+avx512vnni", kindEVNNI, hasEVNNI, dotQ1_0ActsBatchEVNNI, dotQ1_0ActsRowsEVNNI},
	{"avx512", kindQuad, hasQuad, dotQ1_0ActsBatch512, dotQ1_0ActsRows512},
}

// eachBatchKernel calls f with each batch kernel that the CPU runs in
// place of init's choice (with its activation layout), or once with
// init's choice where there is no assembly kernel; it returns the names
// of the kernels it skipped.
func eachBatchKernel(f func(name string)) (skipped []string) {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasF16C {
		f(kernelSet)
		return nil
	}
	for _, k := range batchKernels {
		if !k.has {
			skipped = append(skipped, k.name)
			continue
		}
		batch, rows, set := dotQ1_0ActsBatch, dotQ1_0ActsRows, kernelSet
		b, q := byteLayout, quadLayout
		dotQ1_0ActsBatch, dotQ1_0ActsRows, kernelSet = k.batch, k.rows, k.name
		byteLayout, quadLayout = k.kind != kindQuad, k.kind == kindQuad
		f(k.name)
		dotQ1_0ActsBatch, dotQ1_0ActsRows, kernelSet = batch, rows, set
		byteLayout, quadLayout = b, q
	}
	return skipped
}

// TestBatchKernels runs the batch tests with every batch kernel the CPU
// has, not only the one init chose: the AVX2 fallback and the AVX-VNNI
// kernels (VEX and EVEX) stay tested on AVX-512 CPUs.
func TestBatchKernels(t *testing.T) {
	skipped := eachBatchKernel(func(name string) {
		t.Run(name, func(t *testing.T) {
			TestDotQ1_0ActsBatch(t)
			TestDotQ1_0ActsBatchSpecial(t)
			TestDotQ1_0ActsRows(t)
			TestPackWords(t)
		})
	})
	for _, name := range skipped {
		t.Run(name, func(t *testing.T) { t.Skip("the CPU lacks this kernel's instructions") })
	}
}

// allLayouts makes Acts.Set fill the layouts of every batch kernel the
// CPU has while a benchmark runs, so that they can run on the same rows.
func allLayouts(b *testing.B) {
	l := [2]bool{byteLayout, quadLayout}
	byteLayout, quadLayout = true, hasQuad
	b.Cleanup(func() { byteLayout, quadLayout = l[0], l[1] })
}

// BenchmarkQ1Kernels compares the batch kernels the CPU has in one
// process, interleaved per size: one weight row against k tokens, as in
// decoding (k = 1) and prompts (k = 4); Gweights/s counts weights × tokens.
func BenchmarkQ1Kernels(b *testing.B) {
	allLayouts(b)
	for _, n := range []int{2048, 5632} {
		for _, k := range []int{1, 4} {
			w, acts := benchBatch(n, k)
			out := make([]float32, k)
			for _, kern := range batchKernels {
				if !kern.has {
					continue
				}
				b.Run(strconv.Itoa(n)+"/"+strconv.Itoa(k)+"/"+kern.name, func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					cpubench.Run(b, n*k, func() { kern.batch(w, acts, out, 1, n/BlockQ1_0) })
					b.ReportMetric(float64(n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
				})
			}
		}
	}
}

// BenchmarkQ1KernelsRows is BenchmarkQ1Kernels for DotQ1_0ActsRows, as
// decoding (1 token) and prompts (16) call it: 256 rows (in cache).
func BenchmarkQ1KernelsRows(b *testing.B) {
	allLayouts(b)
	const rows = 256
	for _, n := range []int{2048, 5632} {
		for _, k := range []int{1, 16} {
			r := rand.New(rand.NewPCG(1, 1))
			rb := n / BlockQ1_0 * BlockBytesQ1_0
			w := make([]byte, 0, rows*rb)
			for range rows {
				row, _ := realistic(r, n, QuantizeRowQ1_0, rb)
				w = append(w, row...)
			}
			acts := make([]Acts, k)
			for t := range acts {
				_, x := realistic(r, n, QuantizeRowQ1_0, rb)
				acts[t].Set(x, n)
			}
			out := make([]float32, rows*k)
			for _, kern := range batchKernels {
				if !kern.has {
					continue
				}
				b.Run(strconv.Itoa(n)+"/"+strconv.Itoa(k)+"/"+kern.name, func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					cpubench.Run(b, n*rows*k, func() { kern.rows(w, rb, rows, acts, out, rows, n/BlockQ1_0) })
					b.ReportMetric(float64(n*rows*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
				})
			}
		}
	}
}
