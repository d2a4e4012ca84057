package kernels

import "fmt"

// DeltaRetrieve is the first pass of a gated delta rule step (Gated
// DeltaNet) over one head's state st, len(k) rows of d = len(m) values,
// row-major: for each row i in increasing order
//
//	m += k[i]·(alpha·row_i)
//
// bit for bit the calls Scale(alpha, row_i) and Axpy(k[i], row_i, m):
// each product rounded before it is added (no fused multiply-add), m
// taking the scaled row. The state is only read: DeltaUpdate scales it
// again, the same product, as it writes it, so the pass that is waiting
// on memory stores nothing. One call per head keeps m in registers across
// the rows. It panics if st holds fewer than len(k)·d values.
func DeltaRetrieve(alpha float32, st, k, m []float32) {
	d := len(m)
	if len(st) < len(k)*d {
		panic(fmt.Sprintf("kernels: DeltaRetrieve: state holds %d values, want %d rows of %d", len(st), len(k), d))
	}
	if len(k) == 0 || d == 0 {
		return
	}
	deltaRetrieve(alpha, st, k, m, d)
}

// DeltaUpdate is the second pass of the step over st, len(k) rows of d =
// len(delta) values: for each row i in increasing order
//
//	row_i ← alpha·row_i + k[i]·delta;  o += q[i]·row_i
//
// bit for bit the calls Scale(alpha, row_i), Axpy(k[i], delta, row_i) and
// Axpy(q[i], row_i, o), o taking the updated row. It panics if st holds
// fewer than len(k)·d values, q fewer than len(k) or o fewer than d.
func DeltaUpdate(alpha float32, st, k, delta, q, o []float32) {
	d := len(delta)
	if len(st) < len(k)*d || len(q) < len(k) || len(o) < d {
		panic(fmt.Sprintf("kernels: DeltaUpdate: %d rows of %d need state %d, q %d and o %d, have %d, %d and %d",
			len(k), d, len(k)*d, len(k), d, len(st), len(q), len(o)))
	}
	if len(k) == 0 || d == 0 {
		return
	}
	deltaUpdate(alpha, st, k, delta, q[:len(k)], o[:d], d)
}

// The kernels take the columns j < len(m) (len(delta)) of len(k) rows
// stride values apart: columns are independent, so the vector kernels
// split them into strips and leave a tail to the Go ones.
var (
	deltaRetrieve = deltaRetrieveGo
	deltaUpdate   = deltaUpdateGo
)

func deltaRetrieveGo(alpha float32, st, k, m []float32, stride int) {
	d := len(m)
	for i, ki := range k {
		row := st[i*stride : i*stride+d]
		for j, v := range row {
			m[j] += float32(ki * float32(alpha*v))
		}
	}
}

func deltaUpdateGo(alpha float32, st, k, delta, q, o []float32, stride int) {
	d := len(delta)
	o = o[:d]
	for i, ki := range k {
		row := st[i*stride : i*stride+d]
		qi := q[i]
		for j, v := range row {
			row[j] = float32(ki*delta[j]) + float32(alpha*v)
			o[j] += float32(qi * row[j])
		}
	}
}
