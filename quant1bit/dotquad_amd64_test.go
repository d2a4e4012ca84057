//go:build !purego

package quant1bit

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// bothLayouts makes Acts.Set fill the AVX2 and the AVX-512 layouts while
// a test runs, so that both kernels can run on the same rows.
func bothLayouts(t testing.TB) {
	if !hasQuad {
		t.Skip("no AVX-512 kernel on this CPU")
	}
	b, q := batchLayout, quadLayout
	batchLayout, quadLayout = true, true
	t.Cleanup(func() { batchLayout, quadLayout = b, q })
}

// BenchmarkQ1Kernels compares the AVX2 and AVX-512 batch kernels in one
// process, interleaved per size: one weight row against k tokens, as in
// decoding (k = 1) and prompts (k = 4); Gweights/s counts weights × tokens.
func BenchmarkQ1Kernels(b *testing.B) {
	bothLayouts(b)
	kernels := []struct {
		name string
		f    func([]byte, []Acts, []float32, int, int)
	}{{"avx2", dotQ1_0ActsBatchAVX2}, {"avx512", dotQ1_0ActsBatch512}}
	for _, n := range []int{2048, 5632} {
		for _, k := range []int{1, 4} {
			w, acts := benchBatch(n, k)
			out := make([]float32, k)
			for _, kern := range kernels {
				b.Run(strconv.Itoa(n)+"/"+strconv.Itoa(k)+"/"+kern.name, func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					cpubench.Run(b, n*k, func() { kern.f(w, acts, out, 1, n/BlockQ1_0) })
					b.ReportMetric(float64(n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
				})
			}
		}
	}
}

// withAVX2Batch runs f with the AVX2 batch kernels and their layout in
// place of the AVX-512 ones, which init chose on this CPU.
func withAVX2Batch(t *testing.T, f func(*testing.T)) {
	if !hasQuad {
		t.Skip("the AVX2 batch kernels are the ones in use")
	}
	batch, rows, set := dotQ1_0ActsBatch, dotQ1_0ActsRows, kernelSet
	defer func() {
		dotQ1_0ActsBatch, dotQ1_0ActsRows, kernelSet = batch, rows, set
		batchLayout, quadLayout = false, true
	}()
	dotQ1_0ActsBatch, dotQ1_0ActsRows, kernelSet = dotQ1_0ActsBatchAVX2, dotQ1_0ActsRowsAVX2, "avx2"
	batchLayout, quadLayout = true, false
	f(t)
}

// TestAVX2BatchKernels keeps the AVX2 fallback tested on AVX-512 CPUs:
// the batch tests again, with the AVX2 kernels.
func TestAVX2BatchKernels(t *testing.T) {
	withAVX2Batch(t, func(t *testing.T) {
		TestDotQ1_0ActsBatch(t)
		TestDotQ1_0ActsBatchSpecial(t)
		TestDotQ1_0ActsRows(t)
	})
}

// BenchmarkQ1KernelsRows is BenchmarkQ1Kernels for DotQ1_0ActsRows, as
// decoding (1 token) and prompts (16) call it: 256 rows (in cache).
func BenchmarkQ1KernelsRows(b *testing.B) {
	bothLayouts(b)
	kernels := []struct {
		name string
		f    func([]byte, int, int, []Acts, []float32, int, int)
	}{{"avx2", dotQ1_0ActsRowsAVX2}, {"avx512", dotQ1_0ActsRows512}}
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
			for _, kern := range kernels {
				b.Run(strconv.Itoa(n)+"/"+strconv.Itoa(k)+"/"+kern.name, func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					cpubench.Run(b, n*rows*k, func() { kern.f(w, rb, rows, acts, out, rows, n/BlockQ1_0) })
					b.ReportMetric(float64(n*rows*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
				})
			}
		}
	}
}
