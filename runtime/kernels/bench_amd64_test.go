//go:build !purego

package kernels

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// BenchmarkDecodeF16 streams a 128 MiB F16 matrix (rows of 2048, far
// beyond the caches) through each DotF16F32 kernel this CPU runs, one row
// at a time and as DotF16F32Rows does it: the memory-bound decoding step,
// the kernel sets side by side in one process. MB/s counts weight bytes;
// cpu-Gweights/s (two bytes each) the thread's CPU time only, which a
// shared machine disturbs less.
func BenchmarkDecodeF16(b *testing.B) {
	const n, rows = 2048, 32768
	r := rand.New(rand.NewPCG(3, 4))
	w := make([]byte, 2*n*rows+2<<20)
	cpubench.HugePages(w) // as the runtime maps model weights
	w = w[:2*n*rows]
	for i := 0; i < len(w); i += 2 {
		binary.LittleEndian.PutUint16(w[i:], half.F32ToF16(float32(r.NormFloat64())))
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = half.F16ToF32(half.F32ToF16(float32(r.NormFloat64())))
	}
	out := make([]float32, rows)
	for _, k := range f16F32Kernels {
		b.Run(k.name+"/each", func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			cpubench.Run(b, n*rows, func() {
				for r := range out {
					out[r] = k.dot(u16View(w[r*2*n:], n), x)
				}
			})
		})
		b.Run(k.name+"/rows", func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			cpubench.Run(b, n*rows, func() { k.rows(w, 2*n, x, out) })
		})
	}
}
