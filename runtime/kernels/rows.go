package kernels

import "fmt"

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
