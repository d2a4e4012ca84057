package sparse

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func randMatrix(rows, cols int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	return w
}

func TestZeroNM(t *testing.T) {
	for _, tc := range []struct{ n, m, rows, cols int }{{2, 4, 7, 64}, {1, 4, 3, 12}, {3, 4, 5, 8}, {4, 8, 4, 32}, {2, 8, 2, 16}} {
		w := randMatrix(tc.rows, tc.cols, 1)
		orig := slices.Clone(w)
		act := make([]float64, tc.cols)
		for j := range act {
			act[j] = float64(j%5) + 0.5
		}
		for _, a := range [][]float64{nil, act} {
			w := slices.Clone(orig)
			z := zeroNM(w, tc.cols, tc.n, tc.m, a)
			if want := int64(tc.rows * tc.cols / tc.m * (tc.m - tc.n)); z != want {
				t.Errorf("%d:%d: zeroed %d, want %d", tc.n, tc.m, z, want)
			}
			// Every group keeps exactly its N best scores, untouched.
			for g := 0; g < len(w); g += tc.m {
				var kept, dropped []float64
				for k := 0; k < tc.m; k++ {
					s := math.Abs(float64(orig[g+k])) * weightOf(a, (g+k)%tc.cols)
					if w[g+k] == 0 {
						dropped = append(dropped, s)
					} else {
						if w[g+k] != orig[g+k] {
							t.Fatalf("kept weight changed")
						}
						kept = append(kept, s)
					}
				}
				if len(kept) != tc.n {
					t.Fatalf("%d:%d group %d keeps %d", tc.n, tc.m, g/tc.m, len(kept))
				}
				if slices.Min(kept) < slices.Max(dropped) {
					t.Fatalf("%d:%d group %d: kept %v, dropped %v", tc.n, tc.m, g/tc.m, kept, dropped)
				}
			}
		}
	}
}

func TestZeroNMTiesKeepLowerIndex(t *testing.T) {
	w := []float32{1, -1, 1, -1, 0, 0, 0, 0}
	zeroNM(w, 8, 2, 4, nil)
	if !slices.Equal(w, []float32{1, -1, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("got %v", w)
	}
}

// bruteBlocks ranks tiles independently: mean |w| per tile.
func bruteBlocks(w []float32, rows, cols, b int, s float64) []bool {
	type tile struct {
		r0, c0 int
		mean   float64
	}
	var tiles []tile
	for r0 := 0; r0 < rows; r0 += b {
		for c0 := 0; c0 < cols; c0 += b {
			var sum float64
			n := 0
			for r := r0; r < min(r0+b, rows); r++ {
				for c := c0; c < min(c0+b, cols); c++ {
					sum += math.Abs(float64(w[r*cols+c]))
					n++
				}
			}
			tiles = append(tiles, tile{r0, c0, sum / float64(n)})
		}
	}
	slices.SortStableFunc(tiles, func(a, b tile) int {
		switch {
		case a.mean < b.mean:
			return -1
		case a.mean > b.mean:
			return 1
		}
		return 0
	})
	zero := make([]bool, len(w))
	for _, tl := range tiles[:int(math.Round(s*float64(len(tiles))))] {
		for r := tl.r0; r < min(tl.r0+b, rows); r++ {
			for c := tl.c0; c < min(tl.c0+b, cols); c++ {
				zero[r*cols+c] = true
			}
		}
	}
	return zero
}

func TestZeroBlocks(t *testing.T) {
	for _, tc := range []struct {
		rows, cols, b int
		s             float64
	}{{64, 64, 32, 0.5}, {64, 128, 16, 0.25}, {40, 70, 16, 0.5}, {8, 8, 4, 0.75}, {10, 10, 32, 0.3}} {
		w := randMatrix(tc.rows, tc.cols, 2)
		want := bruteBlocks(w, tc.rows, tc.cols, tc.b, tc.s)
		z := zeroBlocks(w, tc.rows, tc.cols, tc.b, tc.s, nil)
		var n int64
		for i, zz := range want {
			if zz {
				n++
			}
			if zz != (w[i] == 0) {
				t.Fatalf("%+v: element %d zero=%v, want %v", tc, i, w[i] == 0, zz)
			}
		}
		if z != n {
			t.Errorf("%+v: counted %d zeros, want %d", tc, z, n)
		}
		if tc.rows%tc.b == 0 && tc.cols%tc.b == 0 && float64(z) != tc.s*float64(tc.rows*tc.cols) {
			t.Errorf("%+v: sparsity %v, want exactly %v", tc, float64(z)/float64(tc.rows*tc.cols), tc.s)
		}
	}
}

func TestLowest(t *testing.T) {
	got := lowest([]float64{3, 1, 2, 1, 5}, 3)
	if !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("got %v", got)
	}
	if lowest([]float64{1}, 0) != nil {
		t.Fatal("k=0")
	}
}
