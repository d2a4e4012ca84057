package quant1bit

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// benchDot reports weight bytes per second (MB/s) and weights per second
// for one row of n elements, which stays in cache: the compute ceiling of
// the kernel.
func benchDot(b *testing.B, n int, enc func([]float32, []byte), block, blockBytes int, dot func(w, x []byte, nb int) float32) {
	r := rand.New(rand.NewPCG(1, 1))
	w, x := realistic(r, n, enc, n/block*blockBytes)
	b.SetBytes(int64(len(w)))
	var s float32
	cpuBench(b, n, func() { s += dot(w, x, n/block) })
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
	_ = s
}

func BenchmarkDotQ1_0(b *testing.B) {
	for _, n := range []int{2048, 5632} {
		b.Run(strconv.Itoa(n), func(b *testing.B) { benchDot(b, n, QuantizeRowQ1_0, BlockQ1_0, BlockBytesQ1_0, dotQ1_0) })
		b.Run(strconv.Itoa(n)+"/go", func(b *testing.B) { benchDot(b, n, QuantizeRowQ1_0, BlockQ1_0, BlockBytesQ1_0, dotQ1_0Go) })
	}
}

func BenchmarkDotQ1_0Acts(b *testing.B) {
	benchActs(b, QuantizeRowQ1_0, BlockQ1_0, DotQ1_0Acts)
}

func BenchmarkDotQ2_0Acts(b *testing.B) {
	benchActs(b, QuantizeRowQ2_0, BlockQ2_0, DotQ2_0Acts)
}

// benchActs is benchDot for a kernel taking activations prepared once.
func benchActs(b *testing.B, enc func([]float32, []byte), block int, dot func([]byte, *Acts) float32) {
	for _, n := range []int{2048, 5632} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var a Acts
			benchDot(b, n, enc, block, 18, func(w, x []byte, nb int) float32 {
				if a.Len() == 0 {
					a.Set(x, nb*block)
				}
				return dot(w, &a)
			})
		})
	}
}

func BenchmarkDotQ2_0(b *testing.B) {
	for _, n := range []int{2048, 5632} {
		b.Run(strconv.Itoa(n), func(b *testing.B) { benchDot(b, n, QuantizeRowQ2_0Ref, BlockQ2_0, BlockBytesQ2_0, dotQ2_0) })
		b.Run(strconv.Itoa(n)+"/go", func(b *testing.B) { benchDot(b, n, QuantizeRowQ2_0Ref, BlockQ2_0, BlockBytesQ2_0, dotQ2_0Go) })
	}
}

// benchQuantize reports MB/s of float32 input.
func benchQuantize(b *testing.B, f func([]float32, []byte), block, blockBytes int) {
	const n = 5632
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0.02)
	}
	y := make([]byte, n/block*blockBytes)
	b.SetBytes(4 * n)
	cpuBench(b, 0, func() { f(x, y) })
}

func BenchmarkQuantizeRowQ1_0(b *testing.B) {
	benchQuantize(b, QuantizeRowQ1_0, BlockQ1_0, BlockBytesQ1_0)
}

func BenchmarkQuantizeRowQ2_0Ref(b *testing.B) {
	benchQuantize(b, QuantizeRowQ2_0Ref, BlockQ2_0, BlockBytesQ2_0)
}

func BenchmarkQuantizeRowQ2_0(b *testing.B) {
	benchQuantize(b, QuantizeRowQ2_0, BlockQ2_0, BlockBytesQ2_0)
}
