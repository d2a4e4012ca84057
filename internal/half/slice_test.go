package half

import (
	"math"
	"testing"
)

// TestSliceDecodersMatchGo compares the chosen slice converters with the
// Go loops on every bit pattern, at every length and offset around the
// vector width.
func TestSliceDecodersMatchGo(t *testing.T) {
	src := make([]byte, 2<<16+64)
	for i := range 1 << 16 {
		src[2*i], src[2*i+1] = byte(i), byte(i>>8)
	}
	for _, c := range []struct {
		name      string
		fast, ref func([]float32, []byte)
	}{{"F16", F16SliceToF32, f16SliceGo}, {"BF16", BF16SliceToF32, bf16SliceGo}} {
		check := func(n, off int) {
			got, want := make([]float32, n), make([]float32, n)
			c.fast(got, src[off:off+2*n])
			c.ref(want, src[off:off+2*n])
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s n=%d off=%d: element %d = %#08x, want %#08x", c.name, n, off, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
		}
		check(1<<16, 0)
		for n := 0; n <= 40; n++ {
			check(n, 2*n+1)
		}
	}
}
