package runtime

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qnnprep/qnnprep/runtime/kernels"
)

// deltaRuleCalls is deltaRule as it was before kernels.DeltaRetrieve and
// DeltaUpdate: four kernel calls per state row.
func deltaRuleCalls(st, q, k, v, o, m []float32, alpha, beta float32, dk, dv int) {
	clear(m)
	for i := 0; i < dk; i++ {
		row := st[i*dv : (i+1)*dv]
		kernels.Scale(alpha, row)
		kernels.Axpy(k[i], row, m)
	}
	for j := range m {
		m[j] = beta * (v[j] - m[j]) // δ
	}
	clear(o)
	for i := 0; i < dk; i++ {
		row := st[i*dv : (i+1)*dv]
		kernels.Axpy(k[i], m, row)
		kernels.Axpy(q[i], row, o)
	}
}

// TestDeltaRuleMatchesCalls runs several tokens through deltaRule and
// deltaRuleCalls from the same state and compares the state and every
// output bit for bit, for the Qwen3.5 head shape (128×128) and others
// with tails, with some special values (±0, subnormals, ±Inf, NaN).
func TestDeltaRuleMatchesCalls(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-45, float32(math.Inf(1)), float32(math.NaN())}
	vec := func(n int, edges bool) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
			if edges && r.IntN(32) == 0 {
				x[i] = special[r.IntN(len(special))]
			}
		}
		return x
	}
	for _, shape := range [][2]int{{128, 128}, {64, 128}, {128, 64}, {16, 200}, {3, 7}, {5, 129}} {
		for _, edges := range []bool{false, true} {
			dk, dv := shape[0], shape[1]
			st := vec(dk*dv, edges)
			ref := append([]float32(nil), st...)
			m, mref := make([]float32, dv), make([]float32, dv)
			o, oref := make([]float32, dv), make([]float32, dv)
			for tok := range 4 {
				q, k, v := vec(dk, edges), vec(dk, edges), vec(dv, edges)
				alpha, beta := float32(r.Float64()), float32(r.Float64())
				deltaRule(st, q, k, v, o, m, alpha, beta, dk, dv)
				deltaRuleCalls(ref, q, k, v, oref, mref, alpha, beta, dk, dv)
				for i := range st {
					if math.Float32bits(st[i]) != math.Float32bits(ref[i]) && !(st[i] != st[i] && ref[i] != ref[i]) {
						t.Fatalf("%dx%d edges=%v token %d: state[%d] = %v, calls %v", dk, dv, edges, tok, i, st[i], ref[i])
					}
				}
				for j := range o {
					if math.Float32bits(o[j]) != math.Float32bits(oref[j]) && !(o[j] != o[j] && oref[j] != oref[j]) {
						t.Fatalf("%dx%d edges=%v token %d: o[%d] = %v, calls %v", dk, dv, edges, tok, j, o[j], oref[j])
					}
				}
			}
		}
	}
}
