package int8

import (
	"fmt"
	"slices"

	"github.com/qnnprep/qnnprep/internal/panel"
)

// Matrix products for prompts. DotQ8_0's order is block-serial: each
// block's integer sum s is exact, then sum += float32(s)·(w.d·x.d). The
// integer sums may be formed in any order, so MulQ8_0 forms them with
// lanes running over weight rows instead of over a block's 32 codes:
// sixteen rows' codes are laid out transposed (a panel) and each
// activation pair is broadcast against them. That needs no horizontal
// reduction per block, which is what bounds the dot-product form on AVX2
// without VNNI, and every output is still DotQ8_0's exact float32
// sequence.

// Q8_0Batch holds activation rows prepared for MulQ8_0: codes widened to
// int16 and scales as float32, padded with zero rows to a multiple of
// four tokens.
type Q8_0Batch struct {
	t, n, nb int
	stride   int       // elements from one token's codes to the next
	x        []int16   // [token][stride], n codes each
	d        []float32 // [token group][block][4]

	// The AMX layout (amx_amd64.go), which setAMX fills when the AMX
	// kernel is selected and there are at least amxMinTokens rows.
	xa  []byte    // [16-token group][block][code quad][token][4] int8 codes
	xad []float32 // [16-token group][block][token] scales

	// The AVX-VNNI layout (vnni_amd64.go), which setVNNI fills when that
	// kernel is selected.
	xb []byte  // [token][stride] int8 codes
	xc []int32 // [token group][block][4] −128·Σx, the unsigned weights' correction
}

// setAMX lays a batch out for the AMX kernel; nil unless it is selected.
var setAMX func(b *Q8_0Batch, x []byte, xstride int)

// setVNNI lays a batch out for the AVX-VNNI kernel; nil unless it is
// selected.
var setVNNI func(b *Q8_0Batch, x []byte, xstride int)

// Set fills b from t Q8_0 rows of n elements (n a multiple of 32), row i
// at x[i*xstride:]. It reuses b's storage. It panics if the rows do not
// fit in x.
func (b *Q8_0Batch) Set(x []byte, xstride, t, n int) {
	if n <= 0 || n%BlockQ8_0 != 0 || t <= 0 {
		panic(fmt.Sprintf("int8: Q8_0Batch.Set: %d rows of %d elements", t, n))
	}
	nb := n / BlockQ8_0
	if xstride < nb*BlockBytesQ8_0 || (t-1)*xstride+nb*BlockBytesQ8_0 > len(x) {
		panic(fmt.Sprintf("int8: Q8_0Batch.Set: %d rows of %d bytes at stride %d do not fit in %d", t, nb*BlockBytesQ8_0, xstride, len(x)))
	}
	tp := (t + 3) &^ 3
	// Rows a cache line longer than a power of two, so that the kernel's
	// four token streams do not fall into one L1 set (n = 2048 would put
	// them 4 KiB apart).
	b.t, b.n, b.nb, b.stride = t, n, nb, n+BlockQ8_0
	nx, nd := tp*b.stride, tp*nb
	b.x = slices.Grow(b.x[:0], nx)[:nx]
	b.d = slices.Grow(b.d[:0], nd)[:nd]
	for i := range tp {
		xs := b.x[i*b.stride : i*b.stride+n]
		if i >= t {
			clear(xs)
			for k := range nb {
				b.d[((i/4)*nb+k)*4+i%4] = 0
			}
			continue
		}
		row := x[i*xstride:]
		for k := range nb {
			blk := row[k*BlockBytesQ8_0 : (k+1)*BlockBytesQ8_0]
			b.d[((i/4)*nb+k)*4+i%4] = f16At(blk)
			for j, c := range blk[2:] {
				xs[k*BlockQ8_0+j] = int16(int8(c))
			}
		}
	}
	b.xa, b.xad = b.xa[:0], b.xad[:0]
	if setAMX != nil {
		setAMX(b, x, xstride)
	}
	b.xb, b.xc = b.xb[:0], b.xc[:0]
	if setVNNI != nil {
		setVNNI(b, x, xstride)
	}
}

// MulQ8_0 sets out[t*outStride+r] = DotQ8_0(w[r*rowBytes:], x_t, n) for
// every weight row r < rows and activation row t of x, bit for bit, for
// any codes (−128 included). It panics if the rows do not fit in w or out.
func MulQ8_0(w []byte, rowBytes, rows int, x *Q8_0Batch, out []float32, outStride int) {
	if rows <= 0 {
		return
	}
	nb := x.nb
	if rowBytes < nb*BlockBytesQ8_0 || (rows-1)*rowBytes+nb*BlockBytesQ8_0 > len(w) {
		panic(fmt.Sprintf("int8: MulQ8_0: %d rows of %d elements at stride %d do not fit in %d bytes", rows, x.n, rowBytes, len(w)))
	}
	if outStride < rows || (x.t-1)*outStride+rows > len(out) {
		panic(fmt.Sprintf("int8: MulQ8_0: %d×%d outputs at stride %d do not fit in %d", x.t, rows, outStride, len(out)))
	}
	mulQ8_0(w, rowBytes, rows, x, out, outStride)
}

// mulQ8_0 is the implementation chosen at init; the arguments are checked.
var mulQ8_0 = mulQ8_0Go

func mulQ8_0Go(w []byte, rowBytes, rows int, x *Q8_0Batch, out []float32, outStride int) {
	for t := range x.t {
		xs := x.x[t*x.stride : t*x.stride+x.n]
		for r := range rows {
			// DotQ8_0's sequence (dotQ8_0GoFrom) on the widened codes.
			var sum float32
			for k := range x.nb {
				wb := w[r*rowBytes+k*BlockBytesQ8_0 : r*rowBytes+(k+1)*BlockBytesQ8_0]
				var s int32
				for j, c := range wb[2:] {
					s += int32(int8(c)) * int32(xs[k*BlockQ8_0+j])
				}
				d := f16At(wb) * x.d[((t/4)*x.nb+k)*4+t%4]
				sum += float32(float32(s) * d)
			}
			out[t*outStride+r] = sum
		}
	}
}

// Panel geometry: panelRows weight rows per panel (as panel.Q8_0 lays
// them out), cut along the columns into pieces of at most panelBlocks
// blocks (16 KiB of int16 codes, so a piece stays in L1 while every token
// group passes over it).
const (
	panelRows   = panel.Q8Rows
	panelBlocks = 16
)
