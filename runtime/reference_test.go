package runtime

import (
	"fmt"
	"math"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// refModel is a second, deliberately plain implementation of the forward
// pass written from the architecture reference (§1–5): float64 throughout,
// whole sequence at once, no cache, no kernels. It checks the runtime's
// math (gate interleave, GQA and GDN head mapping, partial rope, conv
// state, recurrence) rather than its determinism.
type refModel struct {
	cfg model.Config
	w   map[string][]float64
}

func newRefModel(t *testing.T, m *model.Model) *refModel {
	r := &refModel{cfg: m.Config, w: map[string][]float64{}}
	for _, tt := range m.Tensors {
		f, err := tt.Float32()
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, len(f))
		for i, x := range f {
			v[i] = float64(x)
		}
		r.w[tt.Name] = v
	}
	return r
}

func (r *refModel) get(name string) []float64 {
	v, ok := r.w[name]
	if !ok {
		panic("reference: no tensor " + name)
	}
	return v
}

// mv is W·x for a ggml {cols, rows} matrix.
func mv(w, x []float64) []float64 {
	cols := len(x)
	out := make([]float64, len(w)/cols)
	for i := range out {
		var s float64
		for j, xv := range x {
			s += w[i*cols+j] * xv
		}
		out[i] = s
	}
	return out
}

func rms(x, w []float64, eps float64) []float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	sc := 1 / math.Sqrt(s/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * sc
		if w != nil {
			out[i] *= w[i]
		}
	}
	return out
}

func sig(x float64) float64    { return 1 / (1 + math.Exp(-x)) }
func silu64(x float64) float64 { return x * sig(x) }

// logits returns the logits after every token of toks.
func (r *refModel) logits(toks []int32) [][]float64 {
	c := r.cfg
	H := c.Hidden
	T := len(toks)
	x := make([][]float64, T)
	emb := r.get("token_embd.weight")
	for i, tk := range toks {
		x[i] = append([]float64(nil), emb[int(tk)*H:(int(tk)+1)*H]...)
	}
	eps := float64(c.RMSEps)
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		a := make([][]float64, T)
		for i := range x {
			a[i] = rms(x[i], r.get(p+"attn_norm.weight"), eps)
		}
		var mix [][]float64
		if c.LayerKinds[l] == model.DeltaNet {
			mix = r.gdn(p, a)
		} else {
			mix = r.attn(p, a)
		}
		norm := p + "ffn_norm.weight"
		if _, ok := r.w[norm]; !ok {
			norm = p + "post_attention_norm.weight"
		}
		for i := range x {
			for j := range x[i] {
				x[i][j] += mix[i][j]
			}
			h := rms(x[i], r.get(norm), eps)
			g, u := mv(r.get(p+"ffn_gate.weight"), h), mv(r.get(p+"ffn_up.weight"), h)
			for j := range g {
				g[j] = silu64(g[j]) * u[j]
			}
			d := mv(r.get(p+"ffn_down.weight"), g)
			for j := range x[i] {
				x[i][j] += d[j]
			}
		}
	}
	out := make([][]float64, T)
	head, ok := r.w["output.weight"]
	if !ok {
		head = emb
	}
	for i := range x {
		out[i] = mv(head, rms(x[i], r.get("output_norm.weight"), eps))
	}
	return out
}

func (r *refModel) rope(v []float64, pos int) {
	c := r.cfg
	n := c.RopeDim
	for i := 0; i < n/2; i++ {
		theta := float64(pos) * math.Pow(c.RopeTheta, -2*float64(i)/float64(n))
		if c.RopeFreqFactors != nil {
			theta /= float64(c.RopeFreqFactors[i])
		}
		a, b := 2*i, 2*i+1 // NORM: adjacent pairs
		if c.RopeNeox {
			a, b = i, i+n/2
		}
		x0, x1 := v[a], v[b]
		v[a] = x0*math.Cos(theta) - x1*math.Sin(theta)
		v[b] = x0*math.Sin(theta) + x1*math.Cos(theta)
	}
}

func (r *refModel) attn(p string, a [][]float64) [][]float64 {
	c := r.cfg
	D, nh, nkv := c.HeadDim, c.Heads, c.KVHeads
	T := len(a)
	q := make([][][]float64, T) // [t][head][D]
	gate := make([][][]float64, T)
	k := make([][][]float64, T)
	v := make([][][]float64, T)
	for t := range a {
		qa := mv(r.get(p+"attn_q.weight"), a[t])
		ka := mv(r.get(p+"attn_k.weight"), a[t])
		va := mv(r.get(p+"attn_v.weight"), a[t])
		if c.QKVBias {
			for i, b := range r.get(p + "attn_q.bias") {
				qa[i] += b
			}
			for i, b := range r.get(p + "attn_k.bias") {
				ka[i] += b
			}
			for i, b := range r.get(p + "attn_v.bias") {
				va[i] += b
			}
		}
		for h := 0; h < nh; h++ {
			if c.AttnOutputGate { // per head [q_h | gate_h]
				q[t] = append(q[t], qa[h*2*D:h*2*D+D])
				gate[t] = append(gate[t], qa[h*2*D+D:(h+1)*2*D])
			} else {
				q[t] = append(q[t], qa[h*D:(h+1)*D])
			}
		}
		for h := 0; h < nkv; h++ {
			k[t] = append(k[t], ka[h*D:(h+1)*D])
			v[t] = append(v[t], va[h*D:(h+1)*D])
		}
		for h := range q[t] {
			if c.QKNorm {
				q[t][h] = rms(q[t][h], r.get(p+"attn_q_norm.weight"), float64(c.RMSEps))
			}
			r.rope(q[t][h], t)
		}
		for h := range k[t] {
			if c.QKNorm {
				k[t][h] = rms(k[t][h], r.get(p+"attn_k_norm.weight"), float64(c.RMSEps))
			}
			r.rope(k[t][h], t)
		}
	}
	out := make([][]float64, T)
	for t := range a {
		o := make([]float64, nh*D)
		for h := 0; h < nh; h++ {
			kh := h / (nh / nkv)
			s := make([]float64, t+1)
			mx := math.Inf(-1)
			for j := 0; j <= t; j++ {
				for d := 0; d < D; d++ {
					s[j] += q[t][h][d] * k[j][kh][d]
				}
				s[j] /= math.Sqrt(float64(D))
				mx = math.Max(mx, s[j])
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			for j := range s {
				for d := 0; d < D; d++ {
					o[h*D+d] += s[j] / sum * v[j][kh][d]
				}
			}
			if c.AttnOutputGate {
				for d := 0; d < D; d++ {
					o[h*D+d] *= sig(gate[t][h][d])
				}
			}
		}
		out[t] = mv(r.get(p+"attn_output.weight"), o)
	}
	return out
}

func (r *refModel) gdn(p string, a [][]float64) [][]float64 {
	c := r.cfg
	Hk, Hv, Dk, Dv, K := c.SSMKeyHeads, c.SSMValueHeads, c.SSMKeyDim, c.SSMValueDim, c.ConvKernel
	keyDim, convDim := Hk*Dk, c.ConvDim()
	T := len(a)
	conv := r.get(p + "ssm_conv1d.weight") // {K, convDim}: channel ch, tap j at ch*K+j
	raw := make([][]float64, T)
	for t := range a {
		raw[t] = mv(r.get(p+"attn_qkv.weight"), a[t])
	}
	S := make([][]float64, Hv) // [h][i*Dv+j]
	for h := range S {
		S[h] = make([]float64, Dk*Dv)
	}
	out := make([][]float64, T)
	for t := range a {
		u := make([]float64, convDim)
		for ch := 0; ch < convDim; ch++ {
			var s float64
			for j := 0; j < K; j++ {
				if src := t - (K - 1) + j; src >= 0 {
					s += conv[ch*K+j] * raw[src][ch]
				}
			}
			u[ch] = silu64(s)
		}
		l2 := func(v []float64) {
			var s float64
			for _, x := range v {
				s += x * x
			}
			sc := 1 / math.Sqrt(s+1e-6)
			for i := range v {
				v[i] *= sc
			}
		}
		for g := 0; g < Hk; g++ {
			l2(u[g*Dk : (g+1)*Dk])
			l2(u[keyDim+g*Dk : keyDim+(g+1)*Dk])
		}
		z := mv(r.get(p+"attn_gate.weight"), a[t])
		b := mv(r.get(p+"ssm_beta.weight"), a[t])
		al := mv(r.get(p+"ssm_alpha.weight"), a[t])
		y := make([]float64, Hv*Dv)
		for h := 0; h < Hv; h++ {
			kh := h / (Hv / Hk)
			if c.SSMTiledHeads {
				kh = h % Hk
			}
			q := u[kh*Dk : (kh+1)*Dk]
			k := u[keyDim+kh*Dk : keyDim+(kh+1)*Dk]
			v := u[2*keyDim+h*Dv : 2*keyDim+(h+1)*Dv]
			beta := sig(b[h])
			sp := al[h] + r.get(p + "ssm_dt.bias")[h]
			if sp <= 20 {
				sp = math.Log1p(math.Exp(sp))
			}
			alpha := math.Exp(sp * r.get(p + "ssm_a")[h])
			st := S[h]
			for i := range st {
				st[i] *= alpha
			}
			for j := 0; j < Dv; j++ {
				var m float64
				for i := 0; i < Dk; i++ {
					m += st[i*Dv+j] * k[i]
				}
				delta := beta * (v[j] - m)
				for i := 0; i < Dk; i++ {
					st[i*Dv+j] += k[i] * delta
				}
			}
			o := make([]float64, Dv)
			for j := 0; j < Dv; j++ {
				for i := 0; i < Dk; i++ {
					o[j] += st[i*Dv+j] * q[i] / math.Sqrt(float64(Dk))
				}
			}
			o = rms(o, r.get(p+"ssm_norm.weight"), float64(c.RMSEps))
			for j := range o {
				y[h*Dv+j] = o[j] * silu64(z[h*Dv+j])
			}
		}
		out[t] = mv(r.get(p+"ssm_out.weight"), y)
	}
	return out
}

// TestAgainstReference: the runtime's logits (F32 weights) agree with the
// float64 reference to within float32 rounding (1e-5 of the logit spread;
// a wrong head mapping or gate layout is off by ~20%).
func TestAgainstReference(t *testing.T) {
	for _, arch := range archs {
		t.Run(string(arch), func(t *testing.T) {
			cfg := synth.Config(arch, false)
			if arch == model.Llama {
				// Frequency factors exist only with llama3 scaling: 1, 2, 4
				// and 8, each for a quarter of the rotated pairs.
				cfg.RopeScaling = model.RopeScaling{Type: model.RopeLlama3, Factor: 8}
				cfg.RopeFreqFactors = make([]float32, cfg.RopeDim/2)
				for i := range cfg.RopeFreqFactors {
					cfg.RopeFreqFactors[i] = float32(int(1) << (4 * i / len(cfg.RopeFreqFactors)))
				}
			}
			m := tinyModel(t, cfg, gguf.F32, 21)
			toks := randomTokens(12, cfg.VocabSize, 22)
			want := newRefModel(t, m).logits(toks)
			got, err := newEngine(t, m, Options{}).NewState().ForwardAll(toks)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				lo, hi := math.Inf(1), math.Inf(-1)
				for _, v := range want[i] {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
				var worst float64
				for j, v := range want[i] {
					worst = math.Max(worst, math.Abs(float64(got[i][j])-v))
				}
				if worst > 1e-5*(hi-lo) {
					t.Errorf("token %d: max |Δlogit| %.3g, spread %.3g", i, worst, hi-lo)
				}
			}
		})
	}
}
