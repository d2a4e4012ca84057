package sparse

import (
	"cmp"
	"math"
	"slices"
)

// weightOf is the activation factor of input column j: ‖X_j‖ for Wanda,
// 1 without activations.
func weightOf(act []float64, j int) float64 {
	if act == nil {
		return 1
	}
	return act[j]
}

func absf(v float32) float64 { return math.Abs(float64(v)) }

// zeroNM zeroes, in every row of w (rows of cols), the M−N lowest-scoring
// weights of each group of M consecutive elements; ties keep the lower
// index. cols must be a multiple of M. It returns the number of weights in
// the zero set.
func zeroNM(w []float32, cols, n, m int, act []float64) int64 {
	idx := make([]int, m)
	score := make([]float64, m)
	var zeroed int64
	for g := 0; g+m <= len(w); g += m {
		j0 := g % cols
		for k := range m {
			idx[k] = k
			score[k] = absf(w[g+k]) * weightOf(act, j0+k)
		}
		// Highest score first, lower index first on ties: keep idx[:n].
		if m <= 16 {
			// Stable insertion sort: no closure, few compares.
			for i := 1; i < m; i++ {
				x, j := idx[i], i
				for j > 0 && score[idx[j-1]] < score[x] {
					idx[j] = idx[j-1]
					j--
				}
				idx[j] = x
			}
		} else {
			slices.SortFunc(idx, func(a, b int) int {
				if c := cmp.Compare(score[b], score[a]); c != 0 {
					return c
				}
				return cmp.Compare(a, b)
			})
		}
		for _, k := range idx[n:] {
			w[g+k] = 0
		}
		zeroed += int64(m - n)
	}
	return zeroed
}

// zeroBlocks zeroes the round(s × tiles) lowest-scoring b×b tiles of w
// (rows of cols). Tiles are ranked by mean score per weight (edge tiles may
// be smaller), then by index. It returns the number of weights zeroed.
func zeroBlocks(w []float32, rows, cols, b int, s float64, act []float64) int64 {
	tr, tc := (rows+b-1)/b, (cols+b-1)/b
	tiles := tr * tc
	k := int(math.Round(s * float64(tiles)))
	if k <= 0 {
		return 0
	}
	k = min(k, tiles)
	score := make([]float64, tiles)
	for r := 0; r < rows; r++ {
		row := w[r*cols : (r+1)*cols]
		base := (r / b) * tc
		for j, v := range row {
			score[base+j/b] += absf(v) * weightOf(act, j)
		}
	}
	for t := range score {
		h := min(b, rows-(t/tc)*b)
		wd := min(b, cols-(t%tc)*b)
		score[t] /= float64(h * wd)
	}
	order := make([]int, tiles)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(score[a], score[b]) })
	var zeroed int64
	for _, t := range order[:k] {
		r0, c0 := (t/tc)*b, (t%tc)*b
		r1, c1 := min(r0+b, rows), min(c0+b, cols)
		for r := r0; r < r1; r++ {
			clear(w[r*cols+c0 : r*cols+c1])
		}
		zeroed += int64((r1 - r0) * (c1 - c0))
	}
	return zeroed
}

// zeroRowsCols zeroes the given rows and columns of w (rows of cols).
func zeroRowsCols(w []float32, cols int, zr, zc []int) {
	for _, r := range zr {
		clear(w[r*cols : (r+1)*cols])
	}
	if len(zc) == 0 {
		return
	}
	for r := 0; r+cols <= len(w); r += cols {
		for _, c := range zc {
			w[r+c] = 0
		}
	}
}

// rowColScores returns Σ_j |w_ij|·a_j per row and per column.
func rowColScores(w []float32, cols int, act []float64) (rowS, colS []float64) {
	rows := len(w) / cols
	rowS, colS = make([]float64, rows), make([]float64, cols)
	for r := 0; r < rows; r++ {
		var s float64
		for j, v := range w[r*cols : (r+1)*cols] {
			x := absf(v) * weightOf(act, j)
			s += x
			colS[j] += x
		}
		rowS[r] = s
	}
	return rowS, colS
}

// lowest returns the indices of the k lowest scores (ties: lower index
// first), sorted ascending by index.
func lowest(score []float64, k int) []int {
	if k <= 0 {
		return nil
	}
	order := make([]int, len(score))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(score[a], score[b]) })
	out := append([]int(nil), order[:min(k, len(order))]...)
	slices.Sort(out)
	return out
}
