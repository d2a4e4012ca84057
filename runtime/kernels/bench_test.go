package kernels

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// The dot benchmarks report weight bytes per second (MB/s) and weights
// per second for one row of n elements, which stays in cache: the compute
// ceiling of the kernel; cpu-Gweights/s counts the thread's CPU time only.

func reportWeights(b *testing.B, n int) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
}

func BenchmarkDotF32(b *testing.B) {
	for _, n := range []int{2048, 5632} {
		r := rand.New(rand.NewPCG(1, 1))
		w, x := randomF32(r, n, false), randomF32(r, n, false)
		for _, k := range []struct {
			name string
			dot  func(a, b []float32) float32
		}{{"", dotF32}, {"/go", dotF32Go}} {
			b.Run(strconv.Itoa(n)+k.name, func(b *testing.B) {
				b.SetBytes(4 * int64(n))
				var s float32
				cpubench.Run(b, n, func() { s += k.dot(w, x) })
				reportWeights(b, n)
			})
		}
	}
}

func benchDot16(b *testing.B, round func(float32) uint16, asm, ref func(w, x []uint16) float32) {
	for _, n := range []int{2048, 5632} {
		r := rand.New(rand.NewPCG(1, 1))
		w, x := randomU16(r, n, round), randomU16(r, n, round)
		for _, k := range []struct {
			name string
			dot  func(w, x []uint16) float32
		}{{"", asm}, {"/go", ref}} {
			b.Run(strconv.Itoa(n)+k.name, func(b *testing.B) {
				b.SetBytes(2 * int64(n))
				var s float32
				cpubench.Run(b, n, func() { s += k.dot(w, x) })
				reportWeights(b, n)
			})
		}
	}
}

func BenchmarkDotF16(b *testing.B)  { benchDot16(b, half.F32ToF16, dotF16, dotF16Go) }
func BenchmarkDotBF16(b *testing.B) { benchDot16(b, half.F32ToBF16, dotBF16, dotBF16Go) }

func BenchmarkAxpy(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	x, y := randomF32(r, 128, false), randomF32(r, 128, false)
	b.SetBytes(4 * 128)
	cpubench.Run(b, 0, func() { Axpy(0.5, x, y) })
}
