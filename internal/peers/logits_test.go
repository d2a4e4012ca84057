package peers_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/testkit"
)

// refFirstLogits computes stories260K's logits after BOS alone, in float64,
// straight from the GGUF weights. At the first position attention over a
// single key returns its value, so neither RoPE nor softmax is involved:
// a forward pass short enough to write here as an independent reference.
func refFirstLogits(t *testing.T, path string, tok int) []float64 {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type mat struct {
		rows, cols int
		v          []float32
	}
	get := func(name string) mat {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("no tensor %s", name)
		}
		b, err := f.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, ti.Elements())
		if err := gguf.Dequantize(ti.Type, b, v); err != nil {
			t.Fatal(err)
		}
		return mat{rows: int(ti.Elements() / ti.Dims[0]), cols: int(ti.Dims[0]), v: v}
	}
	mul := func(m mat, x []float64) []float64 {
		y := make([]float64, m.rows)
		for r := range y {
			for c, xv := range x {
				y[r] += float64(m.v[r*m.cols+c]) * xv
			}
		}
		return y
	}
	norm := func(x []float64, w mat) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/float64(len(x))+1e-5)
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = v * s * float64(w.v[i])
		}
		return y
	}
	emb := get("token_embd.weight")
	h := make([]float64, emb.cols)
	for i := range h {
		h[i] = float64(emb.v[tok*emb.cols+i])
	}
	const heads, kvHeads, headDim = 8, 4, 8
	for l := 0; l < 5; l++ {
		p := func(s string) mat { return get(fmt.Sprintf("blk.%d.%s", l, s)) }
		v := mul(p("attn_v.weight"), norm(h, p("attn_norm.weight")))
		o := make([]float64, heads*headDim)
		for hd := range heads {
			kv := hd / (heads / kvHeads)
			copy(o[hd*headDim:(hd+1)*headDim], v[kv*headDim:(kv+1)*headDim])
		}
		for i, x := range mul(p("attn_output.weight"), o) {
			h[i] += x
		}
		x := norm(h, p("ffn_norm.weight"))
		g, u := mul(p("ffn_gate.weight"), x), mul(p("ffn_up.weight"), x)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		for i, d := range mul(p("ffn_down.weight"), g) {
			h[i] += d
		}
	}
	return mul(get("output.weight"), norm(h, get("output_norm.weight")))
}

// LlamaLogits returns llama.cpp's real logits (shifted by their maximum):
// they match an independent float64 forward pass of stories260K.
func TestLlamaLogitsMatchReference(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	path := stories260K(t)
	rows, err := peers.LlamaLogits(path, []int32{1})
	if err != nil {
		t.Fatal(err)
	}
	ref := refFirstLogits(t, path, 1)
	if len(rows[0]) != len(ref) {
		t.Fatalf("%d logits, reference has %d", len(rows[0]), len(ref))
	}
	refMax := math.Inf(-1)
	for _, v := range ref {
		refMax = max(refMax, v)
	}
	var worst float64
	for i, v := range ref {
		d := math.Abs(float64(rows[0][i]) - (v - refMax))
		worst = max(worst, d)
		// llama.cpp computes in float32 (some steps in F16): about 1e-3
		// on a spread of 25.
		if d > 5e-3 {
			t.Errorf("token %d: llama.cpp %g, reference %g (both minus their maximum)", i, rows[0][i], v-refMax)
		}
	}
	t.Logf("largest difference from the float64 reference: %.2g (spread %.3g)", worst, refMax-minOf(ref))
}

func minOf(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = min(m, x)
	}
	return m
}
