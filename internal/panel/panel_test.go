package panel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type impl struct {
	name string
	q8_0 func(w []byte, rowBytes, nb int, codes []int16, d []float32)
	f16  func(w []byte, rowBytes, m int, dst []float32, lanes int)
	bf16 func(w []byte, rowBytes, m int, dst []float32, lanes int)
}

// sentinel marks destination slots a call must not write.
const sentinel = 0x7fc01234

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sentinels(n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = math.Float32frombits(sentinel)
	}
	return f
}

// requireSameBits compares float32 slices bit for bit (NaN payloads too).
func requireSameBits(t testing.TB, want, got []float32, what string) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %#x, Go %#x", what, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
		}
	}
}

// checkQ8_0 lays out nb blocks of rows stride bytes apart from w with f
// and with the Go twin and requires the same codes and scale bits, and
// nothing written past them.
func checkQ8_0(t testing.TB, f func([]byte, int, int, []int16, []float32), w []byte, stride, nb int) {
	t.Helper()
	want, got := make([]int16, nb*Q8Codes+8), make([]int16, nb*Q8Codes+8)
	for i := range want {
		want[i], got[i] = -12345, -12345
	}
	wd, gd := sentinels(nb*Q8Rows+4), sentinels(nb*Q8Rows+4)
	q8_0Go(w, stride, nb, want, wd)
	f(w, stride, nb, got, gd)
	require.Equal(t, want, got, "codes")
	requireSameBits(t, wd, gd, "d")
}

// checkF16 converts m groups of eight rows stride bytes apart from w with
// k's F16 and BF16 layouts and with their Go twins into vectors of lanes
// floats (at dst[off:]) and requires the same bits everywhere, the
// unwritten lanes untouched.
func checkF16(t testing.TB, k impl, w []byte, stride, m, lanes, off int) {
	t.Helper()
	n := off + 32*m*lanes + 8
	for _, c := range []struct {
		name    string
		f, twin func([]byte, int, int, []float32, int)
	}{{"F16", k.f16, f16Go}, {"BF16", k.bf16, bf16Go}} {
		want, got := sentinels(n), sentinels(n)
		c.twin(w, stride, m, want[off:], lanes)
		c.f(w, stride, m, got[off:], lanes)
		requireSameBits(t, want, got, c.name+" panel")
	}
}

// TestMatchesGo checks each assembly layout against its Go twin on random
// bits (NaN and infinite scales and values among them) with rows at a
// stride larger than they are, so that the gap between rows must not be
// read as a row.
func TestMatchesGo(t *testing.T) {
	ks := impls()
	if len(ks) == 0 {
		t.Skip("no assembly in this build or on this CPU")
	}
	r := rand.New(rand.NewPCG(22, 4))
	for _, k := range ks {
		for nb := 1; nb <= 17; nb++ {
			for _, gap := range []int{0, 1, 34} {
				stride := nb*Q8BlockBytes + gap
				w := randomBytes(r, (Q8Rows-1)*stride+nb*Q8BlockBytes)
				checkQ8_0(t, k.q8_0, w, stride, nb)
			}
		}
		for m := 1; m <= 9; m++ {
			for _, gap := range []int{0, 2, 64} {
				stride := 64*m + gap
				w := randomBytes(r, 7*stride+64*m)
				checkF16(t, k, w, stride, m, 8, 0)
				checkF16(t, k, w, stride, m, 16, 0)
				checkF16(t, k, w, stride, m, 16, 8)
			}
		}
	}
}

// TestLayouts checks the Go twins' layouts as the products read them:
// every value of the rows lands in its own slot, and the panel slots are
// all filled (F16 with eight lanes, Q8_0's codes), so no two values
// collide and no slot is left stale.
func TestLayouts(t *testing.T) {
	const nb, m = 3, 2
	w := make([]byte, Q8Rows*nb*Q8BlockBytes)
	for r := range Q8Rows {
		for k := range nb {
			for j := range Q8Block {
				w[r*nb*Q8BlockBytes+k*Q8BlockBytes+2+j] = byte(r*16 + j + k)
			}
		}
	}
	codes := make([]int16, nb*Q8Codes)
	Q8_0(w, nb*Q8BlockBytes, nb, codes, make([]float32, nb*Q8Rows))
	// Pair p of block k: rows 0-15 side by side, codes 2p and 2p+1.
	for k := range nb {
		for p := range Q8Block / 2 {
			for r := range Q8Rows {
				at := k*Q8Codes + p*2*Q8Rows + 2*r
				assert.Equal(t, []int16{int16(int8(byte(r*16 + 2*p + k))), int16(int8(byte(r*16 + 2*p + 1 + k)))}, codes[at:at+2], "block %d pair %d row %d", k, p, r)
			}
		}
	}

	// F16: row r's value i is 1 + (64r + i)/1024, distinct and exact.
	hw := make([]byte, 8*64*m)
	for r := range 8 {
		for i := range 32 * m {
			v := uint16(0x3c00 + r*64 + i) // 1 + small steps: distinct values
			hw[r*64*m+2*i], hw[r*64*m+2*i+1] = byte(v), byte(v>>8)
		}
	}
	dst := sentinels(32 * m * 8)
	F16(hw, 64*m, m, dst, 8)
	seen := map[uint32]bool{}
	for i, v := range dst {
		require.NotEqual(t, uint32(sentinel), math.Float32bits(v), "slot %d not written", i)
		seen[math.Float32bits(v)] = true
	}
	assert.Len(t, seen, len(dst), "values collide")
	// Element 9 of row 3 sits in lane class 9%8 = 1, group 0, quarter 1.
	assert.Equal(t, float32(1+float64(3*64+9)/1024), dst[((1*m+0)*4+1)*8+3])
}

// TestShortArguments checks that rows or destinations too short for the
// layout panic before anything is read or written.
func TestShortArguments(t *testing.T) {
	w := make([]byte, Q8Rows*2*Q8BlockBytes)
	codes, d := make([]int16, 2*Q8Codes), make([]float32, 2*Q8Rows)
	assert.NotPanics(t, func() { Q8_0(w, 2*Q8BlockBytes, 2, codes, d) })
	assert.Panics(t, func() { Q8_0(w[:len(w)-1], 2*Q8BlockBytes, 2, codes, d) }, "rows beyond w")
	assert.Panics(t, func() { Q8_0(w, 2*Q8BlockBytes-1, 2, codes, d) }, "stride below a row")
	assert.Panics(t, func() { Q8_0(w, 2*Q8BlockBytes, 2, codes[1:], d) }, "codes short")
	assert.Panics(t, func() { Q8_0(w, 2*Q8BlockBytes, 2, codes, d[1:]) }, "scales short")

	hw, dst := make([]byte, 8*128), make([]float32, 64*16)
	assert.NotPanics(t, func() { F16(hw, 128, 2, dst, 16) })
	assert.NotPanics(t, func() { F16(hw, 128, 2, dst[8:], 16) })
	assert.Panics(t, func() { F16(hw, 128, 2, dst[9:], 16) }, "dst short")
	assert.Panics(t, func() { F16(hw[:len(hw)-1], 128, 2, dst, 8) }, "rows beyond w")
	assert.Panics(t, func() { F16(hw, 127, 2, dst, 8) }, "stride below a row")
	assert.Panics(t, func() { F16(hw, 128, 2, dst, 4) }, "lanes")
	assert.NotPanics(t, func() { BF16(hw, 128, 2, dst, 16) })
	assert.Panics(t, func() { BF16(hw, 127, 2, dst, 8) }, "BF16: stride below a row")
}

// FuzzMatchesGo feeds arbitrary bits and shapes to the assembly layouts
// and compares them with the Go twins bit for bit.
func FuzzMatchesGo(f *testing.F) {
	f.Add(uint8(1), uint8(0), []byte{0x00, 0x7c, 0x01, 0x7e, 0xff, 0xfc, 0x80})
	f.Add(uint8(16), uint8(3), []byte{0x12, 0x34, 0x00, 0x80})
	ks := impls()
	f.Fuzz(func(t *testing.T, size, gap uint8, data []byte) {
		if len(data) == 0 {
			return
		}
		nb, m := 1+int(size)%17, 1+int(size)%9
		fill := func(n int) []byte {
			w := make([]byte, n)
			for i := range w {
				w[i] = data[i%len(data)] ^ byte(i/len(data))
			}
			return w
		}
		for _, k := range ks {
			stride := nb*Q8BlockBytes + int(gap)
			checkQ8_0(t, k.q8_0, fill((Q8Rows-1)*stride+nb*Q8BlockBytes), stride, nb)
			stride = 64*m + 2*int(gap)
			w := fill(7*stride + 64*m)
			checkF16(t, k, w, stride, m, 8, 0)
			checkF16(t, k, w, stride, m, 16, 8)
		}
	})
}
