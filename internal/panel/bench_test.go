package panel

import (
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// BenchmarkQ8_0 lays out one panel piece as MulQ8_0 does (sixteen rows of
// sixteen blocks of a 5632-wide matrix), the repack every product pays
// per piece before the kernel meets the tokens; cpu-Gweights/s counts
// weights laid out per CPU second.
func BenchmarkQ8_0(b *testing.B) {
	const nb, rowBytes = 16, 5632 / Q8Block * Q8BlockBytes
	r := rand.New(rand.NewPCG(1, 2))
	w := randomBytes(r, Q8Rows*rowBytes)
	codes, d := make([]int16, nb*Q8Codes), make([]float32, nb*Q8Rows)
	cpubench.Run(b, Q8Rows*nb*Q8Block, func() { Q8_0(w, rowBytes, nb, codes, d) })
}

// BenchmarkF16 converts the sixteen rows of one 5632-wide MulF16 panel
// (two calls of eight rows, as the AVX-512 kernel takes them).
func BenchmarkF16(b *testing.B) {
	const n = 5632
	r := rand.New(rand.NewPCG(1, 2))
	w := randomBytes(r, 16*2*n)
	dst := make([]float32, 16*n)
	cpubench.Run(b, 16*n, func() {
		F16(w, 2*n, n/32, dst, 16)
		F16(w[8*2*n:], 2*n, n/32, dst[8:], 16)
	})
}
