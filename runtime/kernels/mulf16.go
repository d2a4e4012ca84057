package kernels

import (
	"fmt"
	"slices"
)

// F16Batch holds activation rows (binary16 values as float32, as
// RoundF16F32 makes them, for MulF16, or bfloat16 values, as RoundBF16F32
// makes them, for MulBF16), each reordered by lane class: element
// i of a row at (i%8)·n/8 + (i/32)·4 + (i%32)/8, so that one pass over a
// class reads its elements in sequence. Rows are added, zero, up to whole
// token groups of the kernel. When n is not a multiple of 32 (no panels)
// the rows are kept as given.
type F16Batch struct {
	t, n int
	x    []float32 // [token][class][group][quarter]
}

// f16PanelRows weight rows share a panel (one vector lane each), and
// f16PanelTokens tokens meet it per kernel pass.
const (
	f16PanelRows   = 8
	f16PanelTokens = 3
)

// f16BatchTokens is the token count F16Batch rounds up to: whole token
// groups of the AVX2 kernel (3) and of the AVX-512 one (4). The kernels
// compute only the groups that hold a token (11 of three for 32 tokens,
// 8 of four), not every padded row.
const f16BatchTokens = 12

// Set fills b from t rows of n values at x[i·xstride:], reusing b's
// storage. It panics if the rows do not fit in x.
func (b *F16Batch) Set(x []float32, xstride, t, n int) {
	if t <= 0 || n < 0 || xstride < n || (t-1)*xstride+n > len(x) {
		panic(fmt.Sprintf("kernels: F16Batch.Set: %d rows of %d at stride %d do not fit in %d", t, n, xstride, len(x)))
	}
	b.t, b.n = t, n
	nx := b.padded() * n
	b.x = slices.Grow(b.x[:0], nx)[:nx]
	clear(b.x[t*n:])
	m := n / 32
	for i := range t {
		src, dst := x[i*xstride:i*xstride+n], b.x[i*n:(i+1)*n]
		if n%32 != 0 {
			copy(dst, src)
			continue
		}
		for g := range m {
			for j, v := range src[g*32 : (g+1)*32] {
				dst[(j%8)*4*m+g*4+j/8] = v
			}
		}
	}
}

// padded is the number of rows b.x holds: t rounded up to whole token
// groups, the added rows zero.
func (b *F16Batch) padded() int {
	return (b.t + f16BatchTokens - 1) / f16BatchTokens * f16BatchTokens
}

// row returns activation row t in its given order.
func (b *F16Batch) row(t int, dst []float32) []float32 {
	n := b.n
	if n%32 != 0 {
		return b.x[t*n : (t+1)*n]
	}
	m := n / 32
	src := b.x[t*n : (t+1)*n]
	for g := range m {
		for j := range 32 {
			dst[g*32+j] = src[(j%8)*4*m+g*4+j/8]
		}
	}
	return dst[:n]
}

// MulF16 is the F16 matrix product of a prompt: out[t·outStride+r] =
// DotF16F32(w[r·rowBytes:], x_t) for r < rows and every row t of x, bit for
// bit. DotF16F32's 32 partial sums are each a sequential sum, so they may
// be formed with lanes over weight rows: eight rows are converted to
// float32 once and laid out transposed (a panel), and each activation
// element is broadcast against them. That needs no reduction per product,
// and the activations pass through L1 once per eight rows instead of once
// per row, which bound the dot-product form in prompts. It panics if the
// rows do not fit.
func MulF16(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	checkedMul("MulF16", mulF16, w, rowBytes, rows, x, out, outStride)
}

// MulBF16 is MulF16 for bfloat16 weights and activations (x holding
// bfloat16 values): out[t·outStride+r] = DotBF16F32(w[r·rowBytes:], x_t),
// bit for bit. The panels' fused multiply-adds are BF16's steps.
func MulBF16(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	checkedMul("MulBF16", mulBF16, w, rowBytes, rows, x, out, outStride)
}

// mulFunc is a MulF16 or MulBF16 implementation.
type mulFunc = func(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int)

// checkedMul runs mul after checking that the rows and outputs fit.
func checkedMul(name string, mul mulFunc, w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	if rows <= 0 || x.t <= 0 {
		return
	}
	n := x.n
	if rowBytes < 2*n || (rows-1)*rowBytes+2*n > len(w) {
		panic(fmt.Sprintf("kernels: %s: %d rows of %d elements at stride %d do not fit in %d bytes", name, rows, n, rowBytes, len(w)))
	}
	if outStride < rows || (x.t-1)*outStride+rows > len(out) {
		panic(fmt.Sprintf("kernels: %s: %d×%d outputs at stride %d do not fit in %d", name, x.t, rows, outStride, len(out)))
	}
	mul(w, rowBytes, rows, x, out, outStride)
}

// mulF16 and mulBF16 are the implementations chosen at init; the
// arguments are checked.
var (
	mulF16  = mulF16Go
	mulBF16 = mulBF16Go
)

func mulF16Go(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	mulGo(DotF16F32, w, rowBytes, rows, x, out, outStride)
}

func mulBF16Go(w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	mulGo(DotBF16F32, w, rowBytes, rows, x, out, outStride)
}

// mulGo takes the products one dot product at a time.
func mulGo(dot func(w []byte, x []float32) float32, w []byte, rowBytes, rows int, x *F16Batch, out []float32, outStride int) {
	n := x.n
	buf := make([]float32, n)
	for t := range x.t {
		xt := x.row(t, buf)
		for r := range rows {
			out[t*outStride+r] = dot(w[r*rowBytes:r*rowBytes+2*n], xt)
		}
	}
}
