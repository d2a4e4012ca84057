package runtime

import (
	"math"
	"testing"
	"unsafe"

	"github.com/qnnprep/qnnprep/gguf"
)

// TestPlaceWeights checks that copying the weights to huge-page memory
// changes no logit, and that the copy does not alias the model's bytes.
func TestPlaceWeights(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q1_0, gguf.F16} {
		t.Run(typ.String(), func(t *testing.T) {
			m := fastRandomModel(t, benchLlama(false), typ)
			mapped, err := New(m, Options{Context: 16, MapWeights: true})
			if err != nil {
				t.Fatal(err)
			}
			placed, err := New(m, Options{Context: 16})
			if err != nil {
				t.Fatal(err)
			}
			// The Q1_0 model (1.7 MB) is below one huge page and stays put.
			if hugePagesAvailable() && typ != gguf.Q1_0 && unsafe.SliceData(placed.layers[0].wq.data) == unsafe.SliceData(mapped.layers[0].wq.data) {
				t.Error("weights were not copied although huge pages are available")
			}
			tokens := []int32{1, 7, 300, 42, 5}
			a, err := mapped.NewState().ForwardAll(tokens)
			if err != nil {
				t.Fatal(err)
			}
			b, err := placed.NewState().ForwardAll(tokens)
			if err != nil {
				t.Fatal(err)
			}
			for i := range a {
				for j := range a[i] {
					if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
						t.Fatalf("token %d logit %d: mapped %v, placed %v", i, j, a[i][j], b[i][j])
					}
				}
			}
		})
	}
}
