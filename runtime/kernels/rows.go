package kernels

import (
	"fmt"
	"math"

	"github.com/qnnprep/qnnprep/internal/half"
)

// DotRows sets out[r] = Dot(x, rows[r·n:(r+1)·n]) for r < len(out), n =
// len(x): one vector against consecutive rows, as attention needs for the
// query heads that share a key. Each result is Dot's, bit for bit. It
// panics if rows is shorter than len(out)·n.
func DotRows(x, rows, out []float32) {
	n := len(x)
	if len(rows) < len(out)*n {
		panic(fmt.Sprintf("kernels: DotRows: len(rows) = %d < %d·%d", len(rows), len(out), n))
	}
	if n == 0 {
		clear(out)
		return
	}
	if len(out) == 0 {
		return
	}
	dotRows(x, rows[:len(out)*n], out)
}

// AxpyRows does Axpy(a[r], x, ys[r·n:(r+1)·n]) for r < len(a), n = len(x):
// one vector added with a weight to consecutive rows, bit for bit as Axpy
// does each. It panics if ys is shorter than len(a)·n.
func AxpyRows(a, x, ys []float32) {
	n := len(x)
	if len(ys) < len(a)*n {
		panic(fmt.Sprintf("kernels: AxpyRows: len(ys) = %d < %d·%d", len(ys), len(a), n))
	}
	if n == 0 || len(a) == 0 {
		return
	}
	axpyRows(a, x, ys[:len(a)*n])
}

// DotRowsSlots computes attention scores for n cache slots and a block
// of tokens in one call: for each slot j < n in order and token t <
// tokens,
//
//	DotRows(k[j·kstride : j·kstride+d], q[t·qstride : t·qstride+m·d],
//		out[j·ostride+t·m : j·ostride+(t+1)·m])
//
// bit for bit: the m query heads of token t that share the key at slot
// j. One call per range of slots replaces one DotRows call per slot and
// token, which cost more than the arithmetic at head size 128 and a GQA
// group of 4; the assembly also prefetches the key rows ahead, which are
// strided in the cache. It panics if an operand is too short.
func DotRowsSlots(n int, k []float32, kstride, d int, q []float32, qstride, tokens, m int, out []float32, ostride int) {
	if n <= 0 || tokens <= 0 || m <= 0 {
		return
	}
	if d < 0 || kstride < d || qstride < m*d || ostride < tokens*m ||
		(n-1)*kstride+d > len(k) || (tokens-1)*qstride+m*d > len(q) || (n-1)*ostride+tokens*m > len(out) {
		panic(fmt.Sprintf("kernels: DotRowsSlots: %d slots × %d tokens × %d rows of %d: k %d (stride %d), q %d (stride %d), out %d (stride %d)",
			n, tokens, m, d, len(k), kstride, len(q), qstride, len(out), ostride))
	}
	if d == 0 {
		for j := range n {
			clear(out[j*ostride : j*ostride+tokens*m])
		}
		return
	}
	dotRowsSlots(n, k, kstride, d, q, qstride, tokens, m, out, ostride)
}

var dotRowsSlots = dotRowsSlotsGo

// dotRowsSlotsGo is DotRowsSlots' definition (the arguments are checked).
func dotRowsSlotsGo(n int, k []float32, kstride, d int, q []float32, qstride, tokens, m int, out []float32, ostride int) {
	for j := range n {
		kj := k[j*kstride : j*kstride+d]
		for t := range tokens {
			o := j*ostride + t*m
			dotRowsGo(kj, q[t*qstride:t*qstride+m*d], out[o:o+m])
		}
	}
}

var (
	dotRows  = dotRowsGo
	axpyRows = axpyRowsGo
)

func dotRowsGo(x, rows, out []float32) {
	n := len(x)
	for r := range out {
		out[r] = dotF32(x, rows[r*n:(r+1)*n])
	}
}

func axpyRowsGo(a, x, ys []float32) {
	n := len(x)
	for r, ar := range a {
		axpy(ar, x, ys[r*n:(r+1)*n])
	}
}

// Prefetch hints that x will be read soon, so that strided walks (a KV
// cache row by row) do not wait on memory. It changes no values.
func Prefetch(x []float32) {
	if len(x) > 0 {
		prefetch(x)
	}
}

var prefetch = func([]float32) {}

// MadF16 sets y[i] = f16(float32(fma(x[i], a, y[i]))) with the fused
// multiply-add in float64 and f16 rounding to the nearest binary16 value
// (ties to even, kept as float32): one update of a binary16 running sum,
// as llama.cpp's flash attention keeps its output over an F16 cache. It
// panics if len(y) < len(x).
func MadF16(a float32, x, y []float32) {
	if len(y) < len(x) {
		panic(fmt.Sprintf("kernels: MadF16: len(y) = %d < len(x) = %d", len(y), len(x)))
	}
	madF16(a, x, y[:len(x)])
}

// ScaleF16 sets x[i] = f16(a·x[i]), the product rounded to float32 and
// then to the nearest binary16 value.
func ScaleF16(a float32, x []float32) { scaleF16(a, x, x) }

var (
	madF16   = madF16Go
	scaleF16 = scaleF16Go
)

func f16(x float32) float32 { return half.F16ToF32(half.F32ToF16(x)) }

func madF16Go(a float32, x, y []float32) {
	for i, v := range x {
		y[i] = f16(float32(math.FMA(float64(v), float64(a), float64(y[i]))))
	}
}

// scaleF16Go sets y[i] = f16(a·x[i]); len(y) ≥ len(x), and y may be x.
func scaleF16Go(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] = f16(v * a)
	}
}
