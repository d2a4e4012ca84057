package sparse

import (
	"math"
	"strings"
	"testing"
)

func TestActivationRecorder(t *testing.T) {
	r := NewActivationRecorder()
	r.Observe("a", []float32{1, 2, 3, 4}, 2, 2) // rows [1 2] [3 4]
	r.Observe("a", []float32{0, -1}, 1, 2)
	r.Observe("b", []float32{2}, 1, 1)
	a, err := r.Activations()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float64{"a": {math.Sqrt(10), math.Sqrt(21)}, "b": {2}}
	for name, w := range want {
		for j := range w {
			if math.Abs(a[name][j]-w[j]) > 1e-12 {
				t.Errorf("%s[%d] = %v, want %v", name, j, a[name][j], w[j])
			}
		}
	}
	if got := strings.Join(a.Tensors(), ","); got != "a,b" {
		t.Errorf("tensors %s", got)
	}
	r.Observe("a", []float32{1, 2, 3}, 1, 3)
	if _, err := r.Activations(); err == nil || !strings.Contains(err.Error(), "3 columns") {
		t.Errorf("mismatch: %v", err)
	}
}
