package runtime

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/blocks"
)

// convPerChannel is causalConv as one channel at a time over
// ssm_conv1d's own [channel][tap] layout: the definition causalConv must
// match bit for bit.
func convPerChannel(u, hist, w, ct []float32) {
	n := len(u)
	kc := len(w) / n
	for ch := 0; ch < n; ch++ {
		wc := w[ch*kc : (ch+1)*kc]
		var sum float32
		for j := 0; j < kc-1; j++ {
			sum += hist[j*n+ch] * wc[j]
		}
		sum += ct[ch] * wc[kc-1]
		u[ch] = silu(sum)
	}
}

func TestCausalConv(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	val := func() float32 {
		switch r.IntN(10) {
		case 0:
			return float32(math.Copysign(0, -1))
		case 1:
			return 0
		case 2:
			return 1e-39 * float32(r.NormFloat64()) // subnormal
		default:
			return float32(r.NormFloat64()) * 3
		}
	}
	for _, kc := range []int{1, 2, 4} {
		for _, n := range []int{1, 7, 16, 33, 600, 8192} {
			w, hist, ct := make([]float32, kc*n), make([]float32, (kc-1)*n), make([]float32, n)
			for _, s := range [][]float32{w, hist, ct} {
				for i := range s {
					s[i] = val()
				}
			}
			want, got := make([]float32, n), make([]float32, n)
			convPerChannel(want, hist, w, ct)
			causalConv(got, hist, tapMajor(w, kc), ct)
			for i := range want {
				if !blocks.SameFloat(got[i], want[i]) {
					t.Fatalf("K=%d, %d channels: channel %d = %g, want %g", kc, n, i, got[i], want[i])
				}
			}
		}
	}
}
