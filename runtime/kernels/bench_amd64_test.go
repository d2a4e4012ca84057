//go:build !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// BenchmarkDecodeF16 streams a 128 MiB F16 matrix (far beyond the
// caches; rows of 2048 as in attention and the FFN's gate and up, and of
// 5632 as in its down projection) through each DotF16F32 kernel this CPU
// runs, one row at a time and as DotF16F32Rows does it: the memory-bound
// decoding step, the kernel sets side by side in one process. MB/s counts
// weight bytes; cpu-Gweights/s (two bytes each) the thread's CPU time
// only, which a shared machine disturbs less.
func BenchmarkDecodeF16(b *testing.B) {
	const size = 128 << 20
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, size+2<<20)
	cpubench.HugePages(buf) // as the runtime maps model weights
	for i := 0; i < size; i += 2 {
		binary.LittleEndian.PutUint16(buf[i:], half.F32ToF16(float32(r.NormFloat64())))
	}
	for _, n := range []int{2048, 5632} {
		rows := size / (2 * n)
		w := buf[:2*n*rows]
		x := make([]float32, n)
		for i := range x {
			x[i] = half.F16ToF32(half.F32ToF16(float32(r.NormFloat64())))
		}
		out := make([]float32, rows)
		for _, k := range f16F32Kernels {
			b.Run(fmt.Sprintf("%d/%s/each", n, k.name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				cpubench.Run(b, n*rows, func() {
					for r := range out {
						out[r] = k.dot(u16View(w[r*2*n:], n), x)
					}
				})
			})
			b.Run(fmt.Sprintf("%d/%s/rows", n, k.name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				cpubench.Run(b, n*rows, func() { k.rows(w, 2*n, x, out) })
			})
		}
	}
}
