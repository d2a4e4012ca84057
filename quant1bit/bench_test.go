package quant1bit

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// benchDot reports weight bytes per second (MB/s) and weights per second
// for one row of n elements, which stays in cache: the compute ceiling of
// the kernel.
func benchDot(b *testing.B, n int, enc func([]float32, []byte), block, blockBytes int, dot func(w, x []byte, nb int) float32) {
	r := rand.New(rand.NewPCG(1, 1))
	w, x := realistic(r, n, enc, n/block*blockBytes)
	b.SetBytes(int64(len(w)))
	var s float32
	cpubench.Run(b, n, func() { s += dot(w, x, n/block) })
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
	cpubench.Run(b, 0, func() { f(x, y) })
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

// benchBatch makes a realistic Q1_0 weight row of n columns and k
// activation rows for it.
func benchBatch(n, k int) (w []byte, acts []Acts) {
	r := rand.New(rand.NewPCG(1, 1))
	w, _ = realistic(r, n, QuantizeRowQ1_0, n/BlockQ1_0*BlockBytesQ1_0)
	acts = make([]Acts, k)
	for t := range acts {
		_, x := realistic(r, n, QuantizeRowQ1_0, n/BlockQ1_0*BlockBytesQ1_0)
		acts[t].Set(x, n)
	}
	return w, acts
}

// BenchmarkDotQ1_0ActsBatch compares DotQ1_0ActsBatch ("batch") with a
// loop of DotQ1_0Acts ("loop") for one weight row of n columns against
// k activation rows; Gweights/s counts weights × tokens.
func BenchmarkDotQ1_0ActsBatch(b *testing.B) {
	for _, n := range []int{2048, 5632} {
		for _, k := range []int{1, 2, 4, 8, 16, 64} {
			w, acts := benchBatch(n, k)
			out := make([]float32, k)
			for _, mode := range []string{"batch", "loop"} {
				b.Run(strconv.Itoa(n)+"/"+strconv.Itoa(k)+"/"+mode, func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					f := func() { DotQ1_0ActsBatch(w, acts, out, 1) }
					if mode == "loop" {
						f = func() {
							for t := range acts {
								out[t] = DotQ1_0Acts(w, &acts[t])
							}
						}
					}
					cpubench.Run(b, n*k, f)
					b.ReportMetric(float64(n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
				})
			}
		}
	}
}

// BenchmarkActsSet reports the cost of unpacking one activation row
// (including the batch layout where the batch kernel uses it).
func BenchmarkActsSet(b *testing.B) {
	const n = 5632
	r := rand.New(rand.NewPCG(1, 1))
	_, x := realistic(r, n, QuantizeRowQ1_0, n/BlockQ1_0*BlockBytesQ1_0)
	var a Acts
	b.SetBytes(int64(len(x)))
	cpubench.Run(b, 0, func() { a.Set(x, n) })
}
