package runtime

import (
	"math"
	"sync"

	"github.com/qnnprep/qnnprep/runtime/kernels"
)

// Elementwise operations, written to round like ggml's CPU kernels:
// float32 arithmetic, with the sums that ggml accumulates in double
// (RMS norm, L2 norm, softmax) accumulated in float64 here too.

// expf is kernels.Expf, the exponential every path shares, so that
// vectorised (kernels.Exp, kernels.SiluMul) and scalar uses agree.
func expf(x float32) float32  { return kernels.Expf(x) }
func sqrtf(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// silu is x·σ(x) computed as x / (1 + e^−x).
func silu(x float32) float32 { return kernels.Silu(x) }

func sigmoid(x float32) float32 { return 1 / (1 + expf(-x)) }

// softplus is log(1 + e^x), and x itself above 20 (ggml and PyTorch).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log(1 + math.Exp(float64(x))))
}

// rmsNorm writes (x / sqrt(mean(x²) + eps)) ⊙ w into dst; w may be nil.
// dst may alias x.
func rmsNorm(dst, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	scale := 1 / sqrtf(mean+eps)
	if w == nil {
		for i, v := range x {
			dst[i] = v * scale
		}
		return
	}
	for i, v := range x {
		dst[i] = v * scale * w[i]
	}
}

// l2Norm scales x in place to unit L2 norm: x · 1/sqrt(Σx² + eps), the
// Hugging Face / FLA form (see doc.go for the choice).
func l2Norm(x []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	scale := 1 / sqrtf(float32(sum)+eps)
	for i := range x {
		x[i] *= scale
	}
}

// ropeTable fills cos and sin (len RopeDim/2) for position p the way
// ggml's rope cache does, scaling included (model.Rope).
func (e *Engine) ropeTable(p int32, cos, sin []float32) {
	e.rope.Table(p, cos, sin)
}

// rope rotates the first len(cos)·2 dimensions of one head in place:
// adjacent pairs (ggml NORM) or dimension i with i+n/2 (NEOX).
func rope(x, cos, sin []float32, neox bool) {
	n := len(cos)
	if neox {
		for i := 0; i < n; i++ {
			x0, x1 := x[i], x[i+n]
			x[i] = x0*cos[i] - x1*sin[i]
			x[i+n] = x0*sin[i] + x1*cos[i]
		}
		return
	}
	for i := 0; i < n; i++ {
		x0, x1 := x[2*i], x[2*i+1]
		x[2*i] = x0*cos[i] - x1*sin[i]
		x[2*i+1] = x0*sin[i] + x1*cos[i]
	}
}

// argmax returns the index of the largest value, the lowest on ties.
func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// siluMul sets g = silu(g)·u, the SwiGLU gate, split over the threads for
// a prompt (elementwise, so the split changes no bit).
func (e *Engine) siluMul(g, u []float32) {
	n := (len(g) + siluChunk - 1) / siluChunk
	if min(e.threads, n) <= 1 || 4*len(g) < e.minWork {
		kernels.SiluMul(g, u) // decoding: not worth a hand-off
		return
	}
	j := siluJobs.Get().(*siluJob)
	j.g, j.u = g, u
	e.parallel(n, 4*len(g), j)
	j.g, j.u = nil, nil
	siluJobs.Put(j)
}

const siluChunk = 1024

// siluJob is one split siluMul call, pooled (see rangeTask).
type siluJob struct{ g, u []float32 }

var siluJobs = sync.Pool{New: func() any { return new(siluJob) }}

func (j *siluJob) run(lo, hi int) {
	kernels.SiluMul(j.g[lo*siluChunk:min(hi*siluChunk, len(j.g))], j.u[lo*siluChunk:])
}
