package blocks

import (
	"math"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
)

// Dot decodes the rows w (of type wt) and x (of type xt), n values each,
// with gguf.Dequantize and returns their float64 dot product and the sum
// of its terms' magnitudes, which scales the rounding a float32 kernel
// may add.
func Dot(t testing.TB, wt gguf.Type, w []byte, xt gguf.Type, x []byte, n int) (dot, mag float64) {
	t.Helper()
	wf, xf := make([]float32, n), make([]float32, n)
	if err := gguf.Dequantize(wt, w, wf); err != nil {
		t.Fatalf("decode %s weights: %v", wt, err)
	}
	if err := gguf.Dequantize(xt, x, xf); err != nil {
		t.Fatalf("decode %s activations: %v", xt, err)
	}
	for i := range n {
		p := float64(wf[i]) * float64(xf[i])
		dot += p
		mag += math.Abs(p)
	}
	return dot, mag
}
