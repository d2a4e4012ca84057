package runtime

import (
	"fmt"
	"math"

	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime/kernels"
)

// scratch holds a State's working buffers, grown to the largest batch seen.
type scratch struct {
	x                                []float32 // forward's residual stream
	xn, q, gate, att, proj, ffa, ffb []float32
	k, v                             []float32 // attention's new K and V rows, [token][kv_heads·head_dim]
	z, ba, bb, conv, delta           []float32
	cos, sin                         []float32
	in, mid                          acts
	attn                             attnTask // attention's split (see rangeTask)
	gdn                              gdnTask  // a DeltaNet token's split
}

func grow(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	*b = (*b)[:n]
	return *b
}

// Embed writes the embeddings of tokens into x (len(tokens)·Hidden),
// decoding just the needed rows of token_embd whatever its type.
func (e *Engine) Embed(tokens []int32, x []float32) error {
	h := e.cfg.Hidden
	if len(x) < len(tokens)*h {
		return fmt.Errorf("runtime: Embed: buffer holds %d values, want %d", len(x), len(tokens)*h)
	}
	for i, t := range tokens {
		if err := e.checkToken(t); err != nil {
			return err
		}
		if err := e.embd.decodeRow(int(t), x[i*h:(i+1)*h]); err != nil {
			return fmt.Errorf("runtime: %s: %w", e.name, err)
		}
	}
	return nil
}

func (e *Engine) checkToken(t int32) error {
	if t < 0 || int(t) >= e.cfg.VocabSize {
		return fmt.Errorf("runtime: %s: token id %d out of range [0, %d)", e.name, t, e.cfg.VocabSize)
	}
	return nil
}

// RunLayers runs decoder layers [a, b) on the hidden states x (T rows of
// Hidden, updated in place) of T new tokens. pos gives each token's RoPE
// position (nil: past+i, where past is the layers' current length). Each
// attention layer appends the tokens' K and V at slots past…past+T−1 and
// token i attends to the slots j < past+T with mask[i·(past+T)+j] true
// (nil: causal, j ≤ past+i). DeltaNet layers ignore mask and pos: their
// recurrence runs over the T tokens in order. All layers in [a, b) must
// hold the same number of positions.
//
// This is the stage entry point: running [0, L) in one call or stage by
// stage over the same x gives identical results.
func (s *State) RunLayers(a, b int, x []float32, pos []int32, mask []bool) error {
	e := s.e
	c := &e.cfg
	if a < 0 || b > len(e.layers) || a > b {
		return fmt.Errorf("runtime: layer range [%d, %d) outside [0, %d)", a, b, len(e.layers))
	}
	if a == b {
		return nil
	}
	h := c.Hidden
	if len(x) == 0 || len(x)%h != 0 {
		return fmt.Errorf("runtime: hidden states hold %d values, not a positive multiple of hidden %d", len(x), h)
	}
	t := len(x) / h
	past := s.layers[a].n
	for i := a; i < b; i++ {
		if s.layers[i].n != past {
			return fmt.Errorf("runtime: layers %d and %d hold %d and %d positions", a, i, past, s.layers[i].n)
		}
	}
	if past+t > e.ctxLen {
		return fmt.Errorf("runtime: %s: %d positions exceed the context length %d", e.name, past+t, e.ctxLen)
	}
	if pos != nil && len(pos) != t {
		return fmt.Errorf("runtime: %d positions for %d tokens", len(pos), t)
	}
	for _, p := range pos {
		if p < 0 {
			return fmt.Errorf("runtime: negative position %d", p)
		}
	}
	if mask != nil {
		n := past + t
		if len(mask) != t*n {
			return fmt.Errorf("runtime: attention mask has %d entries, want %d×%d", len(mask), t, n)
		}
		for i := 0; i < t; i++ {
			seen := false
			for _, ok := range mask[i*n : (i+1)*n] {
				seen = seen || ok
			}
			if !seen {
				return fmt.Errorf("runtime: attention mask row %d allows no position", i)
			}
		}
	}
	if pos == nil {
		pos = make([]int32, t)
		for i := range pos {
			pos[i] = int32(past + i)
		}
	}
	for i := a; i < b; i++ {
		if err := s.layer(i, x, t, pos, mask); err != nil {
			return err
		}
	}
	return nil
}

func (s *State) layer(li int, x []float32, t int, pos []int32, mask []bool) error {
	e := s.e
	c := &e.cfg
	l := &e.layers[li]
	sc := &s.scr
	h := c.Hidden

	xn := grow(&sc.xn, t*h)
	for i := 0; i < t; i++ {
		rmsNorm(xn[i*h:(i+1)*h], x[i*h:(i+1)*h], l.attnNorm, c.RMSEps)
	}
	sc.in.reset(xn, t, h)
	var err error
	if l.kind == model.DeltaNet {
		err = s.deltaNet(li, t)
	} else {
		err = s.attention(li, t, pos, mask)
	}
	if err != nil {
		return err
	}
	for i, v := range sc.proj[:t*h] {
		x[i] += v
	}

	for i := 0; i < t; i++ {
		rmsNorm(xn[i*h:(i+1)*h], x[i*h:(i+1)*h], l.ffnNorm, c.RMSEps)
	}
	sc.in.reset(xn, t, h)
	f := c.FFN
	g, u := grow(&sc.ffa, t*f), grow(&sc.ffb, t*f)
	if err := e.matmuls(&sc.in, []*matrix{l.wgate, l.wup}, [][]float32{g, u}); err != nil {
		return err
	}
	e.siluMul(g, u)
	sc.mid.reset(g, t, f)
	out := grow(&sc.proj, t*h)
	if err := e.matmul(l.wdown, &sc.mid, out); err != nil {
		return err
	}
	for i, v := range out {
		x[i] += v
	}
	return nil
}

// attention runs a (gated) GQA attention block on sc.in and leaves the
// output projection in sc.proj.
func (s *State) attention(li int, t int, pos []int32, mask []bool) error {
	e := s.e
	c := &e.cfg
	l := &e.layers[li]
	ls := &s.layers[li]
	sc := &s.scr
	nh, nkv, d := c.Heads, c.KVHeads, c.HeadDim
	qRows, kvDim := nh*d, nkv*d
	if c.AttnOutputGate {
		qRows *= 2
	}
	q := grow(&sc.q, t*qRows)
	past := ls.n
	// K and V come out slot-major and go into the head-major cache once
	// normed and rotated.
	k, v := grow(&sc.k, t*kvDim), grow(&sc.v, t*kvDim)
	if err := e.matmuls(&sc.in, []*matrix{l.wq, l.wk, l.wv}, [][]float32{q, k, v}); err != nil {
		return err
	}
	if l.bq != nil {
		addBias(q, l.bq)
		addBias(k, l.bk)
		addBias(v, l.bv)
	}
	// Split q and the output gate: attn_q rows are [q_h | gate_h] per head.
	qs := q
	var gate []float32
	if c.AttnOutputGate {
		qs = grow(&sc.gate, 2*t*nh*d) // q then gate, each [t][nh·d]
		gate = qs[t*nh*d:]
		qs = qs[:t*nh*d]
		for i := 0; i < t; i++ {
			for hh := 0; hh < nh; hh++ {
				src := q[i*qRows+hh*2*d:]
				copy(qs[(i*nh+hh)*d:(i*nh+hh+1)*d], src[:d])
				copy(gate[(i*nh+hh)*d:(i*nh+hh+1)*d], src[d:2*d])
			}
		}
	}
	if l.qNorm != nil {
		for j := 0; j < t*nh; j++ {
			rmsNorm(qs[j*d:(j+1)*d], qs[j*d:(j+1)*d], l.qNorm, c.RMSEps)
		}
		for j := 0; j < t*nkv; j++ {
			rmsNorm(k[j*d:(j+1)*d], k[j*d:(j+1)*d], l.kNorm, c.RMSEps)
		}
	}
	if c.RopeDim > 0 {
		half := c.RopeDim / 2
		cos, sin := grow(&sc.cos, half), grow(&sc.sin, half)
		for i := 0; i < t; i++ {
			e.ropeTable(pos[i], cos, sin)
			if s.ropeQ != nil {
				s.ropeQ(cos, sin)
			}
			for hh := 0; hh < nh; hh++ {
				rope(qs[(i*nh+hh)*d:], cos, sin, c.RopeNeox)
			}
			for hh := 0; hh < nkv; hh++ {
				rope(k[(i*nkv+hh)*d:], cos, sin, c.RopeNeox)
			}
		}
	}
	ls.n = past + t
	if e.kvF16 {
		roundF16(k)
		roundF16(v)
		roundF16(qs)
	}
	ls.growKV(past+t, d)
	for hh := 0; hh < nkv; hh++ {
		kh, vh := ls.k[hh][past*d:], ls.v[hh][past*d:]
		for i := 0; i < t; i++ {
			copy(kh[i*d:(i+1)*d], k[(i*nkv+hh)*d:(i*nkv+hh+1)*d])
			copy(vh[i*d:(i+1)*d], v[(i*nkv+hh)*d:(i*nkv+hh+1)*d])
		}
	}

	// Scores, softmax and the weighted sum of V, one (token, head) at a
	// time over the cache slots in order: nothing depends on T, and the
	// pairs are independent, so they are split over the threads.
	n := past + t
	att := grow(&sc.att, t*nh*d)
	clear(att)
	scale := float32(1 / math.Sqrt(float64(d)))
	group := nh / nkv
	// Units are (block of attnTokens tokens, KV head): each reads its KV
	// head's cache rows once for all its query heads.
	blocks := (t + attnTokens - 1) / attnTokens
	sc.attn = attnTask{qs: qs, k: ls.k, v: ls.v, att: att, mask: mask, t: t, nh: nh, nkv: nkv, group: group,
		d: d, past: past, scale: scale, f16: e.kvF16}
	e.parallel(blocks*nkv, t*nh*n*d, &sc.attn)
	sc.attn = attnTask{}
	if gate != nil {
		for i := range att {
			att[i] *= sigmoid(gate[i])
		}
	}
	sc.mid.reset(att, t, nh*d)
	return e.matmul(l.wo, &sc.mid, grow(&sc.proj, t*c.Hidden))
}

// attnTask is attention's split over units (block of attnTokens tokens,
// KV head), held in the State's scratch (see rangeTask).
type attnTask struct {
	qs, att                    []float32
	k, v                       [][]float32 // per KV head
	mask                       []bool
	t, nh, nkv, group, d, past int
	scale                      float32
	f16                        bool
}

func (a *attnTask) run(lo, hi int) {
	w := attnPool.Get().(*attnWork)
	for u := lo; u < hi; u++ {
		b, g := u/a.nkv, u%a.nkv
		i0 := b * attnTokens
		i1 := min(i0+attnTokens, a.t)
		if a.f16 {
			flashBlock(w, a.qs, a.k[g], a.v[g], a.att, i0, i1, g, a.nh, a.group, a.d, a.past, a.mask, a.scale)
		} else {
			attendBlock(w, a.qs, a.k[g], a.v[g], a.att, i0, i1, g, a.nh, a.group, a.d, a.past, a.mask, a.scale)
		}
	}
	attnPool.Put(w)
}

// roundF16 rounds x to binary16 values in place.
func roundF16(x []float32) {
	for i, v := range x {
		x[i] = half.F16ToF32(half.F32ToF16(v))
	}
}

func growCache(b []float32, n int) []float32 {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]float32, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

func addBias(x, b []float32) {
	for i := range x {
		x[i] += b[i%len(b)]
	}
}

// deltaNet runs a Gated DeltaNet block (reference §5.1, per-token
// recurrence) on sc.in and leaves the output projection in sc.proj.
func (s *State) deltaNet(li int, t int) error {
	e := s.e
	c := &e.cfg
	l := &e.layers[li]
	ls := &s.layers[li]
	sc := &s.scr
	hk, hv, dk, dv, kc := c.SSMKeyHeads, c.SSMValueHeads, c.SSMKeyDim, c.SSMValueDim, c.ConvKernel
	keyDim, valueDim, convDim := hk*dk, hv*dv, c.ConvDim()
	r := hv / hk

	// Projections for the whole batch, in one matmuls call: while decoding
	// the threads share one hand-off for all of them.
	qkv := grow(&sc.q, t*convDim)
	z := grow(&sc.z, t*valueDim)
	beta, alpha := grow(&sc.ba, t*hv), grow(&sc.bb, t*hv)
	var ws [maxFused]*matrix
	var outs [maxFused][]float32
	var raw, rawBA []float32
	n := 0
	add := func(w *matrix, out []float32) {
		ws[n], outs[n] = w, out
		n++
	}
	if l.wqkvz != nil {
		raw = grow(&sc.gate, t*(convDim+valueDim))
		add(l.wqkvz, raw)
	} else {
		add(l.wqkv, qkv)
		add(l.wz, z)
	}
	if l.wba != nil {
		rawBA = grow(&sc.att, t*2*hv)
		add(l.wba, rawBA)
	} else {
		add(l.wbeta, beta)
		add(l.walpha, alpha)
	}
	if err := e.matmuls(&sc.in, ws[:n], outs[:n]); err != nil {
		return err
	}
	if raw != nil {
		// Legacy qwen3next ssm_in: per key head g, [q Dk | k Dk | v r·Dv | z r·Dv].
		gw := 2*dk + 2*r*dv
		for i := 0; i < t; i++ {
			src, dst, zd := raw[i*(convDim+valueDim):], qkv[i*convDim:], z[i*valueDim:]
			for g := 0; g < hk; g++ {
				grp := src[g*gw:]
				copy(dst[g*dk:(g+1)*dk], grp[:dk])
				copy(dst[keyDim+g*dk:keyDim+(g+1)*dk], grp[dk:2*dk])
				copy(dst[2*keyDim+g*r*dv:2*keyDim+(g+1)*r*dv], grp[2*dk:2*dk+r*dv])
				copy(zd[g*r*dv:(g+1)*r*dv], grp[2*dk+r*dv:gw])
			}
		}
	}
	if rawBA != nil {
		// qwen3next ssm_ba: per key head g, [b r | a r].
		for i := 0; i < t; i++ {
			for g := 0; g < hk; g++ {
				copy(beta[i*hv+g*r:i*hv+(g+1)*r], rawBA[i*2*hv+g*2*r:])
				copy(alpha[i*hv+g*r:i*hv+(g+1)*r], rawBA[i*2*hv+g*2*r+r:])
			}
		}
	}

	y := grow(&sc.att, t*valueDim)
	u := grow(&sc.conv, convDim)
	qScale := 1 / sqrtf(float32(dk))
	for i := 0; i < t; i++ {
		ct := qkv[i*convDim : (i+1)*convDim]
		causalConv(u, ls.conv, l.conv, ct)
		if kc > 1 {
			copy(ls.conv, ls.conv[convDim:])
			copy(ls.conv[(kc-2)*convDim:], ct)
		}
		qv, kv, vv := u[:keyDim], u[keyDim:2*keyDim], u[2*keyDim:]
		for g := 0; g < hk; g++ {
			l2Norm(qv[g*dk:(g+1)*dk], e.l2Eps)
			l2Norm(kv[g*dk:(g+1)*dk], e.l2Eps)
		}
		for j := range qv {
			qv[j] *= qScale
		}
		zt := z[i*valueDim : (i+1)*valueDim]
		// Value heads are independent: split them over the threads.
		sc.gdn = gdnTask{cfg: c, l: l, ls: ls, qv: qv, kv: kv, vv: vv, z: zt,
			beta: beta[i*hv : (i+1)*hv], alpha: alpha[i*hv : (i+1)*hv],
			y: y[i*valueDim : (i+1)*valueDim], m: grow(&sc.delta, hv*dv)}
		e.parallel(hv, 3*hv*dk*dv, &sc.gdn)
		sc.gdn = gdnTask{}
		ls.n++
		ls.pushSnap(s.rollback)
	}
	sc.mid.reset(y, t, valueDim)
	return e.matmul(l.wssmOut, &sc.mid, grow(&sc.proj, t*c.Hidden))
}

// gdnTask is one token's DeltaNet recurrence split over value heads,
// held in the State's scratch (see rangeTask).
type gdnTask struct {
	cfg                              *model.Config
	l                                *layer
	ls                               *layerState
	qv, kv, vv, z, beta, alpha, y, m []float32 // this token's rows; m: deltaRule's scratch, Dv per head
}

func (g *gdnTask) run(lo, hi int) {
	c := g.cfg
	hk, hv, dk, dv := c.SSMKeyHeads, c.SSMValueHeads, c.SSMKeyDim, c.SSMValueDim
	r := hv / hk
	for h := lo; h < hi; h++ {
		kh := h / r
		if c.SSMTiledHeads {
			kh = h % hk
		}
		q, k := g.qv[kh*dk:(kh+1)*dk], g.kv[kh*dk:(kh+1)*dk]
		vh := g.vv[h*dv : (h+1)*dv]
		b := sigmoid(g.beta[h])
		a := expf(softplus(g.alpha[h]+g.l.ssmDt[h]) * g.l.ssmA[h])
		st := g.ls.ssm[h*dk*dv : (h+1)*dk*dv]
		o := g.y[h*dv : (h+1)*dv]
		deltaRule(st, q, k, vh, o, g.m[h*dv:(h+1)*dv], a, b, dk, dv)
		// Gated RMS norm: (norm(o) ⊙ w) ⊙ silu(z), z's row overwritten
		// (silu(z)·o is o·silu(z): one rounded product either way).
		rmsNorm(o, o, g.l.ssmNorm, c.RMSEps)
		zh := g.z[h*dv : (h+1)*dv]
		kernels.SiluMul(zh, o)
		copy(o, zh)
	}
}

// causalConv sets u to the SiLU of the causal depthwise conv over the
// K−1 cached raw rows hist ([row][channel], oldest first) and this one,
// ct, with the tap-major weights w ([tap][channel]); ct multiplies tap
// K−1. Each channel's sum runs over the taps in order from +0, the
// channels side by side.
func causalConv(u, hist, w, ct []float32) {
	n := len(u)
	kc := len(w) / n
	clear(u)
	for j := 0; j < kc-1; j++ {
		mulAdd(u, hist[j*n:(j+1)*n], w[j*n:(j+1)*n])
	}
	mulAdd(u, ct, w[(kc-1)*n:kc*n])
	kernels.SiluSlice(u)
}

// mulAdd sets y[i] += a[i]·b[i], the product rounded first.
func mulAdd(y, a, b []float32) {
	a, b = a[:len(y)], b[:len(y)]
	for i := range y {
		y[i] = float32(y[i] + float32(a[i]*b[i]))
	}
}

// tapMajor returns ssm_conv1d's [channel][tap] weights as [tap][channel].
func tapMajor(w []float32, taps int) []float32 {
	ch := len(w) / taps
	t := make([]float32, len(w))
	for c := 0; c < ch; c++ {
		for j := 0; j < taps; j++ {
			t[j*ch+c] = w[c*taps+j]
		}
	}
	return t
}

// deltaRule advances one value head's state S [Dk][Dv] by one token and
// writes o = Sᵀq with the updated state:
//
//	S ← αS;  m = Sᵀk;  δ = β(v − m);  S += k δᵀ;  o = Sᵀq
//
// Every sum runs over the key index i in increasing order; products are
// rounded before they are added (kernels.Axpy). m (len dv) is scratch.
// Each pass over S is one kernel call (kernels.DeltaRetrieve, which only
// reads S, and DeltaUpdate, which scales and writes it), bit for bit the
// Scale and Axpy calls per row they replace (deltaRuleCalls in the tests).
func deltaRule(st, q, k, v, o, m []float32, alpha, beta float32, dk, dv int) {
	m, o, k, q = m[:dv], o[:dv], k[:dk], q[:dk]
	clear(m)
	kernels.DeltaRetrieve(alpha, st[:dk*dv], k, m)
	for j := range m {
		m[j] = beta * (v[j] - m[j]) // δ
	}
	clear(o)
	kernels.DeltaUpdate(alpha, st[:dk*dv], k, m, q, o)
}

// Head applies the final norm and the output projection to the T hidden
// rows in x, writing T rows of VocabSize logits into logits.
func (s *State) Head(x []float32, logits []float32) error {
	e := s.e
	h := e.cfg.Hidden
	if len(x) == 0 || len(x)%h != 0 {
		return fmt.Errorf("runtime: hidden states hold %d values, not a positive multiple of hidden %d", len(x), h)
	}
	t := len(x) / h
	if len(logits) < t*e.cfg.VocabSize {
		return fmt.Errorf("runtime: logits buffer holds %d values, want %d", len(logits), t*e.cfg.VocabSize)
	}
	sc := &s.scr
	xn := grow(&sc.xn, t*h)
	for i := 0; i < t; i++ {
		rmsNorm(xn[i*h:(i+1)*h], x[i*h:(i+1)*h], e.outNorm, e.cfg.RMSEps)
	}
	sc.in.reset(xn, t, h)
	return e.matmul(e.out, &sc.in, logits[:t*e.cfg.VocabSize])
}
