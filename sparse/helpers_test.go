package sparse_test

import (
	"context"
	"math"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/sparse"
)

func apply(t testing.TB, m *model.Model, opt sparse.Options) *sparse.Variant {
	t.Helper()
	v, err := sparse.Apply(m, opt)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustPattern(t testing.TB, s string) sparse.Pattern {
	p, err := sparse.ParsePattern(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// zeros counts exact zeros of a tensor.
func zeros(t testing.TB, tn *model.Tensor) int64 {
	w, err := tn.Float32()
	if err != nil {
		t.Fatal(err)
	}
	var z int64
	for _, x := range w {
		if x == 0 {
			z++
		}
	}
	return z
}

func logits(t testing.TB, m *model.Model, tokens []int32) [][]float32 {
	t.Helper()
	e, err := runtime.New(m, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := e.Logits(context.Background(), tokens)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func maxDiff(a, b [][]float32) float64 {
	var d float64
	for i := range a {
		for j := range a[i] {
			d = max(d, math.Abs(float64(a[i][j]-b[i][j])))
		}
	}
	return d
}

// relDiff is maxDiff over the largest |logit| (at least 1): float32
// summation in a different order moves logits by a few ulps of their size.
func relDiff(a, b [][]float32) float64 {
	scale := 1.0
	for _, r := range a {
		for _, x := range r {
			scale = max(scale, math.Abs(float64(x)))
		}
	}
	return maxDiff(a, b) / scale
}

func findReport(r *sparse.Report, name string) (sparse.TensorReport, bool) {
	for _, t := range r.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return sparse.TensorReport{}, false
}

func f32(w []float32) []byte {
	b := make([]byte, 4*len(w))
	for i, x := range w {
		u := math.Float32bits(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}
