package sparse

import (
	"fmt"
	"math"
	"sort"
	"sync"
)

// Activations maps a matrix's canonical name to ‖X_j‖, the L2 norm over
// calibration tokens of each of its input columns (what Wanda multiplies
// |W_ij| by).
type Activations map[string][]float64

// ActivationRecorder accumulates Σ x_j² per input column of every matrix
// product it observes. Its Observe method has the signature of the
// runtime's matmul observer (runtime.Engine.Observe); it is safe for
// concurrent use.
type ActivationRecorder struct {
	mu     sync.Mutex
	sums   map[string][]float64
	tokens map[string]int64
	err    error
}

// NewActivationRecorder returns an empty recorder.
func NewActivationRecorder() *ActivationRecorder {
	return &ActivationRecorder{sums: map[string][]float64{}, tokens: map[string]int64{}}
}

// Observe adds t input rows of cols values (x, row-major) of the product
// with tensor.
func (r *ActivationRecorder) Observe(tensor string, x []float32, t, cols int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sums[tensor]
	if s == nil {
		s = make([]float64, cols)
		r.sums[tensor] = s
	}
	if len(s) != cols || len(x) < t*cols {
		if r.err == nil {
			r.err = fmt.Errorf("sparse: activations of %s: %d columns, earlier %d", tensor, cols, len(s))
		}
		return
	}
	for i := 0; i < t; i++ {
		for j, v := range x[i*cols : (i+1)*cols] {
			s[j] += float64(v) * float64(v)
		}
	}
	r.tokens[tensor] += int64(t)
}

// Activations returns the column norms recorded so far.
func (r *ActivationRecorder) Activations() (Activations, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	out := make(Activations, len(r.sums))
	for name, s := range r.sums {
		n := make([]float64, len(s))
		for j, v := range s {
			n[j] = math.Sqrt(v)
		}
		out[name] = n
	}
	return out, nil
}

// Tensors lists the observed tensors, sorted, for messages.
func (a Activations) Tensors() []string {
	names := make([]string, 0, len(a))
	for n := range a {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
