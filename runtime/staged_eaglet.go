package runtime

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/qnnprep/qnnprep/runtime/kernels"
	"github.com/qnnprep/qnnprep/shard"
)

// Genie's eaglet dialog through a plan with an EAGLE-3 head (QAIRT 2.40
// qualla dialogs/eaglet.cpp; shard/EAGLET.md in this repository).
//
// The target runs its stage graphs on embeddings; its last stage outputs
// last_hidden_states = fc(cat(taps)), one row per token. The draft runs
// its own graph (shard.DraftPlan) over its surfaces: the token's
// embedding (the target's table, as Genie copies the target's embedding
// rows), hidden_states (a feature row), attention mask, RoPE tables and
// its one layer's KV; it outputs logits over the draft vocabulary (mapped
// to target ids by d2t, Genie's draft-token-map) and last_hidden_states.
//
// A step, as the dialog does it with draft-kv-cache:
//   - after a verification, the draft processes the accepted tokens and the
//     bonus token, row i pairing token i+1 with the target feature of row i
//     of the accepted path (root first), and keeps them in its cache;
//   - the tree grows draft-len levels from the bonus token (the root): each
//     drafting sequence takes the top n-branches draft candidates of its
//     row, the first extending it and the rest starting new sequences (at
//     most (draft-len−2)·n·(n−1) + n² of them); a sequence's probability is
//     the product of its candidates' softmax probabilities. Below the last
//     level, the sequences whose probability reaches the n-branches-th
//     largest of the level (at most n-branches, in sequence order) are
//     processed by the draft as one call, each row seeing the committed
//     cache, its ancestors' rows (kept in the cache until the next
//     verification) and itself, at position committed + level, with its
//     parent row's last_hidden_states (the previous call's last row for
//     level 0) as its feature;
//   - the tree is pruned to max-tokens-target-can-evaluate by probability,
//     the target evaluates it in one call (each node sees its ancestors),
//     and the accepted path is the target's greedy choices: the selection
//     mask keeps the root and the matched nodes, so the tokens are Greedy's.
//
// Deviation from the shipped code, which only changes acceptance: a
// sequence that reaches the level threshold after n-branches others stops
// drafting (Genie leaves it drafting with its previous row index), and a
// sequence whose node is pruned is cut there (Genie cuts only below the
// threshold probability).

// stagedEaglet is the eaglet target state of a Staged.
type stagedEaglet struct {
	head     *Eagle3            // fc for last_hidden_states (plans with a draft)
	local    map[int][]float32  // taps computed inside the last stage
	cat      []float32          // fc input scratch
	in       acts               // fc input rows
	pending  [][]float32        // last_hidden_states of committed rows, not yet taken
	record   bool               // keep last_hidden_states rows of every call
	embedErr error              // embedding the input rows failed
	onTree   func([]eagletNode) // tests: every tree the target evaluates
}

// SetEagle3 gives a plan with an eaglet draft the EAGLE-3 head whose fc
// its last stage applies to the taps. The head must be bound to the same
// target engine.
func (s *Staged) SetEagle3(h *Eagle3) error {
	d := s.p.Draft
	switch {
	case d == nil:
		return fmt.Errorf("runtime: staged: plan %s has no eaglet draft", s.p.Model.Name)
	case h == nil:
		s.eaglet.head = nil
		return nil
	case h.t != s.e:
		return fmt.Errorf("runtime: staged: the EAGLE-3 head is bound to another engine than the plan's target")
	}
	c := h.cfg
	if c.Hidden != d.Head.Hidden || c.FFN != d.Head.FFN || c.Heads != d.Head.Heads || c.KVHeads != d.Head.KVHeads ||
		c.HeadDim != d.Head.HeadDim || c.DraftVocab != d.Head.DraftVocab || c.ExtractLayers != d.Head.ExtractLayers {
		return fmt.Errorf("runtime: staged: plan %s's draft head %+v is not this head (hidden %d, ffn %d, heads %d/%d of %d, draft vocab %d, extract layers %v)",
			s.p.Model.Name, d.Head, c.Hidden, c.FFN, c.Heads, c.KVHeads, c.HeadDim, c.DraftVocab, c.ExtractLayers)
	}
	s.eaglet.head = h
	return nil
}

// captureTap writes the input of layer l, when the plan's head reads it,
// into the eagle3_tap_l output of stage k, or keeps it for the last
// stage's fc when the last stage computes it itself.
func (s *Staged) captureTap(v *stagedVariant, k, l int, x []float32) {
	d := s.p.Draft
	if d == nil || !slices.Contains(d.Head.ExtractLayers[:], l) || s.p.TapStage(l) != k {
		return
	}
	n := v.ar * s.e.cfg.Hidden
	if k != len(s.p.Stages)-1 {
		copy(v.f(shard.Eagle3Tap(l)), x[:n])
		return
	}
	if s.eaglet.local == nil {
		s.eaglet.local = map[int][]float32{}
	}
	buf := s.eaglet.local[l]
	s.eaglet.local[l] = append(buf[:0], x[:n]...)
}

// lastHiddenStates fills the last stage's last_hidden_states: the final
// hidden states, or with an eaglet draft the head's fc over the taps.
func (s *Staged) lastHiddenStates(v *stagedVariant, dst, x []float32) error {
	d := s.p.Draft
	if d == nil {
		copy(dst, x)
		return nil
	}
	h := s.eaglet.head
	if h == nil {
		return fmt.Errorf("%s is the EAGLE-3 head's fc over the taps, but no head was given (Staged.SetEagle3)", shard.LastHiddenStates)
	}
	hid, last := s.e.cfg.Hidden, len(s.p.Stages)-1
	nf := 3 * hid
	cat := grow(&s.eaglet.cat, v.ar*nf)
	for j, l := range d.Head.ExtractLayers {
		src := s.eaglet.local[l]
		if s.p.TapStage(l) != last {
			src = v.f(shard.Eagle3Tap(l))
		}
		for r := 0; r < v.ar; r++ {
			copy(cat[r*nf+j*hid:r*nf+(j+1)*hid], src[r*hid:(r+1)*hid])
		}
	}
	s.eaglet.in.reset(cat, v.ar, nf)
	return s.e.matmul(h.fc, &s.eaglet.in, dst[:v.ar*h.cfg.Hidden])
}

// callHidden returns the last_hidden_states rows of the call's first n
// rows while an eaglet decode records them.
func (s *Staged) callHidden(v *stagedVariant, n int) [][]float32 {
	b := v.bufs[shard.LastHiddenStates]
	if !s.eaglet.record || b == nil {
		return nil
	}
	w := len(b.f) / v.ar
	rows := make([][]float32, n)
	for r := range rows {
		rows[r] = slices.Clone(b.f[r*w : (r+1)*w])
	}
	return rows
}

// takeHidden returns and forgets the last_hidden_states of the rows
// committed since the last call.
func (s *Staged) takeHidden() [][]float32 {
	out := s.eaglet.pending
	s.eaglet.pending = nil
	return out
}

// eagletDraft executes the eaglet draft graphs over their surfaces, with
// a KV manager for the head's layer.
type eagletDraft struct {
	h    *Eagle3
	dp   *shard.DraftPlan
	pos  shard.Positional
	vars []*draftVariant // by CL, then AR
	k, v []float32       // cache: [slot][kv_heads·head_dim]
	n    int             // cache slots
	// scratch
	x, q, att, proj, ff1, ff2, xn, kk, vv []float32
	in, mid                               acts
	scores                                []float32
}

type draftVariant struct {
	ar, cl int
	g      *shard.Graph
	bufs   map[string]*surface
}

// newEagletDraft checks the plan's draft graphs against the head.
func newEagletDraft(h *Eagle3, p *shard.Plan) (*eagletDraft, error) {
	dp := p.Draft
	if dp == nil {
		return nil, fmt.Errorf("runtime: eaglet: plan %s has no draft graphs (plan with an EAGLE-3 head)", p.Model.Name)
	}
	d := &eagletDraft{h: h, dp: dp, pos: p.Positional}
	c := h.cfg
	for i := range dp.Graphs {
		g := &dp.Graphs[i]
		ar, cl := int64(g.AR), int64(g.CL)
		if g.AR < 1 || g.CL <= g.AR {
			return nil, fmt.Errorf("runtime: eaglet: draft graph %s: AR %d, CL %d: want a KV graph (CL > AR)", g.Name, g.AR, g.CL)
		}
		hid, nkv, hd := int64(c.Hidden), int64(c.KVHeads), int64(c.HeadDim)
		in := map[string][]int64{
			shard.InputEmbeds: {1, ar, hid}, shard.DraftHiddenIn: {1, ar, hid}, shard.AttentionMask: {1, 1, ar, cl},
			shard.PastKey(0, "in"): {nkv, 1, hd, cl - ar}, shard.PastValue(0, "in"): {nkv, 1, cl - ar, hd},
		}
		if p.Positional == shard.Rope {
			in[shard.PositionIDsCos] = []int64{1, 1, ar, hd / 2}
			in[shard.PositionIDsSin] = []int64{1, 1, ar, hd / 2}
		} else {
			return nil, fmt.Errorf("runtime: eaglet: draft graph %s: absolute positions are not supported (eaglet drafts a tree; use RoPE)", g.Name)
		}
		out := map[string][]int64{
			shard.Logits: {1, ar, int64(c.DraftVocab)}, shard.LastHiddenStates: {1, ar, hid},
			shard.PastKey(0, "out"): {nkv, 1, hd, ar}, shard.PastValue(0, "out"): {nkv, 1, ar, hd},
		}
		for _, io := range []struct {
			kind string
			ts   []shard.Tensor
			want map[string][]int64
		}{{"input", g.Inputs, in}, {"output", g.Outputs, out}} {
			if len(io.ts) != len(io.want) {
				return nil, fmt.Errorf("runtime: eaglet: draft graph %s has %d %ss, the head needs %d (%v)", g.Name, len(io.ts), io.kind, len(io.want), sortedKeys(io.want))
			}
			for _, t := range io.ts {
				w, ok := io.want[t.Name]
				if !ok || !slices.Equal(t.Shape, w) || t.DType != shard.Float32 {
					return nil, fmt.Errorf("runtime: eaglet: draft graph %s: %s %q %v %s, the head needs %v float32", g.Name, io.kind, t.Name, t.Shape, t.DType, w)
				}
			}
		}
		v := &draftVariant{ar: g.AR, cl: g.CL, g: g, bufs: map[string]*surface{}}
		for _, ts := range [][]shard.Tensor{g.Inputs, g.Outputs} {
			for _, t := range ts {
				n := 1
				for _, x := range t.Shape {
					n *= int(x)
				}
				v.bufs[t.Name] = &surface{t: t, f: make([]float32, n)}
			}
		}
		d.vars = append(d.vars, v)
	}
	slices.SortStableFunc(d.vars, func(a, b *draftVariant) int {
		if a.cl != b.cl {
			return a.cl - b.cl
		}
		return a.ar - b.ar
	})
	return d, nil
}

// maxRows is the largest AR.
func (d *eagletDraft) maxRows() int {
	m := 0
	for _, v := range d.vars {
		m = max(m, v.ar)
	}
	return m
}

// draftCall is one draft call's rows: token embeddings' ids, feature
// rows, the in-call parent of each row (−1: none) and the cache slots
// each row sees beyond the first base.
type draftCall struct {
	tokens []int32
	feats  [][]float32
	parent []int
	base   int     // cache slots [0, base) every row sees
	extra  [][]int // per row, further visible cache slots (ancestors kept in the cache)
}

// run executes one draft call on the smallest variant that holds it and
// returns its logits and last_hidden_states rows; the rows' KV is
// appended to the cache.
func (d *eagletDraft) run(c *draftCall) (logits, hidden [][]float32, err error) {
	rows := len(c.tokens)
	var v *draftVariant
	for _, cand := range d.vars {
		if cand.ar >= rows && d.n <= cand.cl-cand.ar {
			v = cand
			break
		}
	}
	if v == nil {
		return nil, nil, fmt.Errorf("runtime: eaglet: no draft graph holds %d rows after %d cache entries (%s)", rows, d.n, shard.RuleEagletDraftCL)
	}
	h := d.h
	cfg := &h.cfg
	t := h.t
	ar, cl := v.ar, v.cl
	past := cl - ar
	hid, nkv, hd := cfg.Hidden, cfg.KVHeads, cfg.HeadDim
	kvd := nkv * hd
	// Inputs, as Genie fills them.
	emb, feat := v.bufs[shard.InputEmbeds].f, v.bufs[shard.DraftHiddenIn].f
	clear(emb)
	clear(feat)
	for r, tok := range c.tokens {
		if err := t.checkToken(tok); err != nil {
			return nil, nil, err
		}
		if err := t.embd.decodeRow(int(tok), emb[r*hid:(r+1)*hid]); err != nil {
			return nil, nil, fmt.Errorf("runtime: eaglet: %w", err)
		}
		if len(c.feats[r]) != hid {
			return nil, nil, fmt.Errorf("runtime: eaglet: feature row of %d values, the head takes %d", len(c.feats[r]), hid)
		}
		copy(feat[r*hid:], c.feats[r])
	}
	mask := v.bufs[shard.AttentionMask].f
	for i := range mask {
		mask[i] = MaskedValue
	}
	pos := make([]int32, ar)
	for r := 0; r < ar; r++ {
		row := mask[r*cl : (r+1)*cl]
		row[past+r] = 0
		if r >= rows {
			pos[r] = int32(d.n + r)
			continue
		}
		seen := c.base
		for j := 0; j < c.base; j++ {
			row[j] = 0
		}
		for _, j := range c.extra[r] {
			row[j] = 0
			seen++
		}
		for a := c.parent[r]; a >= 0; a = c.parent[a] {
			row[past+a] = 0
			seen++
		}
		pos[r] = int32(seen) // Genie: attended entries before the row itself
	}
	cosT, sinT := v.bufs[shard.PositionIDsCos].f, v.bufs[shard.PositionIDsSin].f
	half := hd / 2
	for r := 0; r < ar; r++ {
		h.ropeRow(pos[r], cosT[r*half:(r+1)*half], sinT[r*half:(r+1)*half])
	}
	ki, vi := v.bufs[shard.PastKey(0, "in")].f, v.bufs[shard.PastValue(0, "in")].f
	for j := 0; j < d.n; j++ {
		for hh := 0; hh < nkv; hh++ {
			for i := 0; i < hd; i++ {
				ki[(hh*hd+i)*past+j] = d.k[j*kvd+hh*hd+i]
			}
			copy(vi[(hh*past+j)*hd:(hh*past+j+1)*hd], d.v[j*kvd+hh*hd:j*kvd+(hh+1)*hd])
		}
	}
	if err := d.graph(v); err != nil {
		return nil, nil, fmt.Errorf("runtime: eaglet: draft graph %s: %w", v.g.Name, err)
	}
	// The KV manager keeps every row of the call (draft-kv-cache).
	ko, vo := v.bufs[shard.PastKey(0, "out")].f, v.bufs[shard.PastValue(0, "out")].f
	d.k = growCache(d.k, (d.n+rows)*kvd)
	d.v = growCache(d.v, (d.n+rows)*kvd)
	for r := 0; r < rows; r++ {
		j := d.n + r
		for hh := 0; hh < nkv; hh++ {
			for i := 0; i < hd; i++ {
				d.k[j*kvd+hh*hd+i] = ko[(hh*hd+i)*ar+r]
			}
			copy(d.v[j*kvd+hh*hd:j*kvd+(hh+1)*hd], vo[(hh*ar+r)*hd:(hh*ar+r+1)*hd])
		}
	}
	d.n += rows
	lg, hs := v.bufs[shard.Logits].f, v.bufs[shard.LastHiddenStates].f
	for r := 0; r < rows; r++ {
		logits = append(logits, slices.Clone(lg[r*cfg.DraftVocab:(r+1)*cfg.DraftVocab]))
		hidden = append(hidden, slices.Clone(hs[r*hid:(r+1)*hid]))
	}
	return logits, hidden, nil
}

// truncate drops cache slots past n.
func (d *eagletDraft) truncate(n int) {
	kvd := d.h.cfg.KVHeads * d.h.cfg.HeadDim
	d.n = min(d.n, n)
	d.k, d.v = d.k[:d.n*kvd], d.v[:d.n*kvd]
}

// graph computes the draft graph of v from its input surfaces only, as the
// exported ONNX graph does, and writes its output surfaces.
func (d *eagletDraft) graph(v *draftVariant) error {
	h := d.h
	c := &h.cfg
	e := h.t
	ar, cl := v.ar, v.cl
	past := cl - ar
	H, nh, nkv, hd := c.Hidden, c.Heads, c.KVHeads, c.HeadDim
	qd, kvd, half := nh*hd, nkv*hd, hd/2
	emb, g := v.bufs[shard.InputEmbeds].f, v.bufs[shard.DraftHiddenIn].f
	mask := v.bufs[shard.AttentionMask].f
	cosT, sinT := v.bufs[shard.PositionIDsCos].f, v.bufs[shard.PositionIDsSin].f
	ki, vi := v.bufs[shard.PastKey(0, "in")].f, v.bufs[shard.PastValue(0, "in")].f
	ko, vo := v.bufs[shard.PastKey(0, "out")].f, v.bufs[shard.PastValue(0, "out")].f
	hidOut := v.bufs[shard.LastHiddenStates].f
	// x = [norm(embedding) | norm(g)], embedding first.
	x := grow(&d.x, ar*2*H)
	for i := 0; i < ar; i++ {
		rmsNorm(x[i*2*H:i*2*H+H], emb[i*H:(i+1)*H], h.inNorm, c.RMSEps)
		rmsNorm(x[i*2*H+H:(i+1)*2*H], g[i*H:(i+1)*H], h.hidNorm, c.RMSEps)
	}
	res := hidOut[:ar*H]
	if c.NormBeforeResidual {
		for i := 0; i < ar; i++ {
			copy(res[i*H:(i+1)*H], x[i*2*H+H:(i+1)*2*H])
		}
	} else {
		copy(res, g[:ar*H])
	}
	d.in.reset(x, ar, 2*H)
	q, kk, vv := grow(&d.q, ar*qd), grow(&d.kk, ar*kvd), grow(&d.vv, ar*kvd)
	for _, m := range []struct {
		w   *matrix
		out []float32
	}{{h.wq, q}, {h.wk, kk}, {h.wv, vv}} {
		if err := e.matmul(m.w, &d.in, m.out); err != nil {
			return err
		}
	}
	for i := 0; i < ar; i++ {
		cs, sn := cosT[i*half:(i+1)*half], sinT[i*half:(i+1)*half]
		for j := 0; j < nh; j++ {
			rope(q[(i*nh+j)*hd:], cs, sn, c.RopeNeox)
		}
		for j := 0; j < nkv; j++ {
			rope(kk[(i*nkv+j)*hd:], cs, sn, c.RopeNeox)
		}
	}
	for r := 0; r < ar; r++ {
		for hh := 0; hh < nkv; hh++ {
			for i := 0; i < hd; i++ {
				ko[(hh*hd+i)*ar+r] = kk[r*kvd+hh*hd+i]
			}
			copy(vo[(hh*ar+r)*hd:(hh*ar+r+1)*hd], vv[r*kvd+hh*hd:r*kvd+(hh+1)*hd])
		}
	}
	att := grow(&d.att, ar*qd)
	clear(att)
	scores := grow(&d.scores, cl)
	kcol := make([]float32, hd)
	cols := make([]int, 0, cl)
	scale := float32(1 / math.Sqrt(float64(hd)))
	group := nh / nkv
	key := func(s, kh int) []float32 {
		if s >= past {
			return kk[(s-past)*kvd+kh*hd : (s-past)*kvd+(kh+1)*hd]
		}
		for t := 0; t < hd; t++ {
			kcol[t] = ki[(kh*hd+t)*past+s]
		}
		return kcol
	}
	value := func(s, kh int) []float32 {
		if s >= past {
			return vv[(s-past)*kvd+kh*hd : (s-past)*kvd+(kh+1)*hd]
		}
		return vi[(kh*past+s)*hd : (kh*past+s+1)*hd]
	}
	for i := 0; i < ar; i++ {
		// The visible columns in order: cache slots, then this call's rows.
		cols = cols[:0]
		for s, m := range mask[i*cl : (i+1)*cl] {
			if m == 0 {
				cols = append(cols, s)
			}
		}
		sc := scores[:len(cols)]
		for j := 0; j < nh; j++ {
			qv := q[(i*nh+j)*hd : (i*nh+j+1)*hd]
			kh := j / group
			mx := float32(math.Inf(-1))
			for c, s := range cols {
				sc[c] = kernels.Dot(qv, key(s, kh)) * scale
				mx = max(mx, sc[c])
			}
			for c := range sc {
				sc[c] -= mx
			}
			kernels.Exp(sc)
			var sum float64
			for _, p := range sc {
				sum += float64(p)
			}
			inv := float32(1 / sum)
			o := att[(i*nh+j)*hd : (i*nh+j+1)*hd]
			for c, s := range cols {
				kernels.Axpy(sc[c]*inv, value(s, kh), o)
			}
		}
	}
	d.mid.reset(att, ar, qd)
	proj := grow(&d.proj, ar*H)
	if err := e.matmul(h.wo, &d.mid, proj); err != nil {
		return err
	}
	for i := range res {
		res[i] += proj[i]
	}
	xn := grow(&d.xn, ar*H)
	for i := 0; i < ar; i++ {
		rmsNorm(xn[i*H:(i+1)*H], res[i*H:(i+1)*H], h.postNorm, c.RMSEps)
	}
	d.in.reset(xn, ar, H)
	ga, up := grow(&d.ff1, ar*c.FFN), grow(&d.ff2, ar*c.FFN)
	if err := e.matmul(h.wgate, &d.in, ga); err != nil {
		return err
	}
	if err := e.matmul(h.wup, &d.in, up); err != nil {
		return err
	}
	e.siluMul(ga, up)
	d.mid.reset(ga, ar, c.FFN)
	if err := e.matmul(h.wdown, &d.mid, proj); err != nil {
		return err
	}
	for i := range res {
		res[i] += proj[i]
	}
	for i := 0; i < ar; i++ {
		rmsNorm(xn[i*H:(i+1)*H], res[i*H:(i+1)*H], h.norm, c.RMSEps)
	}
	d.in.reset(xn, ar, H)
	return e.matmul(h.head, &d.in, v.bufs[shard.Logits].f)
}

// ropeRow is the head's RoPE table row for position p (ggml's cache for
// the head's theta, unscaled).
func (h *Eagle3) ropeRow(p int32, cos, sin []float32) {
	theta := float32(p)
	for i := range cos {
		cos[i] = float32(math.Cos(float64(theta)))
		sin[i] = float32(math.Sin(float64(theta)))
		theta *= h.ropeScale
	}
}

// eagletNode is one token of the target's tree.
type eagletNode struct {
	tok    int32
	parent int // node index, −1 for the root
	prob   float32
}

// eagletSeq is one drafting sequence: a path of tree nodes below the root.
type eagletSeq struct {
	nodes    []int // tree nodes of its candidates, root excluded
	prob     float32
	drafting bool
	row      int // its row in the last draft call (−1: the accepted rows' last)
	slots    []int
}

// SpeculateEaglet decodes n tokens after prompt with Genie's eaglet
// dialog (the plan's dialog settings) through the plan's target and draft
// graphs, h being the plan's EAGLE-3 head bound to the target engine. The
// tokens are Greedy's.
func (s *Staged) SpeculateEaglet(ctx context.Context, h *Eagle3, prompt []int32, n int) ([]int32, SpecStats, error) {
	var st SpecStats
	dl := s.p.Dialog
	switch {
	case dl.Type != shard.Eaglet:
		return nil, st, fmt.Errorf("runtime: eaglet: plan %s's dialog is %s", s.p.Model.Name, dl.Type)
	case len(prompt) == 0:
		return nil, st, fmt.Errorf("runtime: empty prompt")
	case n <= 0:
		return nil, st, nil
	}
	if err := s.SetEagle3(h); err != nil {
		return nil, st, err
	}
	d, err := newEagletDraft(h, s.p)
	if err != nil {
		return nil, st, err
	}
	if need := max(dl.NBranches, dl.DraftLen+1); d.maxRows() < need {
		return nil, st, fmt.Errorf("runtime: eaglet: the largest draft AR %d is below %d (%s)", d.maxRows(), need, shard.RuleEagletDraftAR)
	}
	s.Reset()
	s.eaglet.record = true
	defer func() { s.eaglet.record, s.eaglet.pending = false, nil }()
	t0 := time.Now()
	logits, err := s.Forward(prompt)
	if err != nil {
		return nil, st, err
	}
	st.TargetCalls = 1
	root := Argmax(logits)
	out := []int32{root}
	// The draft reads the prompt shifted by one: row i pairs token i+1
	// (the root for the last row) with the target feature of row i.
	dlog, dhid, err := d.chain(append(slices.Clone(prompt[1:]), root), s.takeHidden())
	if err != nil {
		return nil, st, err
	}
	committed := d.n
	t1 := time.Now()
	st.PromptSeconds = t1.Sub(t0).Seconds()
	maxSeq := (dl.DraftLen-2)*dl.NBranches*(dl.NBranches-1) + dl.NBranches*dl.NBranches
	maxSeq = max(maxSeq, 1)
	for len(out) < n {
		if err := ctx.Err(); err != nil {
			return nil, st, err
		}
		tree, err := s.eagletTree(d, root, dlog[len(dlog)-1], dhid[len(dhid)-1], committed, maxSeq)
		if err != nil {
			return nil, st, err
		}
		tree = pruneEagletTree(tree, dl.MaxTargetTokens)
		if room := s.maxCL() - s.Len(); len(tree) > room {
			tree = pruneEagletTree(tree, room)
		}
		if len(tree) == 0 {
			return nil, st, fmt.Errorf("runtime: eaglet: the context is full after %d tokens", s.Len())
		}
		if s.eaglet.onTree != nil {
			s.eaglet.onTree(tree)
		}
		toks := make([]int32, len(tree))
		parents := make([]int, len(tree))
		for i, nd := range tree {
			toks[i], parents[i] = nd.tok, nd.parent
		}
		rows, err := s.Submit(toks, parents)
		if err != nil {
			return nil, st, err
		}
		st.TargetCalls++
		st.Windows++
		st.Proposed += len(tree) - 1
		// Accept: follow the target's greedy choice down the tree.
		sel := make([]bool, len(tree))
		sel[0] = true
		node, accepted := 0, []int32{}
		for {
			y := Argmax(rows[node])
			accepted = append(accepted, y)
			next := -1
			for i := node + 1; i < len(tree); i++ {
				if tree[i].parent == node && tree[i].tok == y {
					next = i
					break
				}
			}
			if next < 0 || len(out)+len(accepted) >= n {
				break
			}
			node, sel[next] = next, true
		}
		if err := s.Commit(sel); err != nil {
			return nil, st, err
		}
		st.Accepted += len(accepted) - 1
		out = append(out, accepted...)
		root = accepted[len(accepted)-1]
		// The draft drops the tree levels and reads the accepted path.
		d.truncate(committed)
		if dlog, dhid, err = d.chain(accepted, s.takeHidden()); err != nil {
			return nil, st, err
		}
		committed = d.n
	}
	st.Seconds = time.Since(t1).Seconds()
	st.Tokens = n
	return out[:n], st, nil
}

// maxCL is the largest context the target's variants hold.
func (s *Staged) maxCL() int {
	m := 0
	for _, v := range s.vars {
		m = max(m, v.cl)
	}
	return m
}

// chain runs the draft over rows (tokens[i], feats[i]) in order, in as
// many calls as its AR needs, keeping them all, and returns the last
// call's logits and hidden rows.
func (d *eagletDraft) chain(tokens []int32, feats [][]float32) (logits, hidden [][]float32, err error) {
	if len(feats) != len(tokens) {
		return nil, nil, fmt.Errorf("runtime: eaglet: %d target feature rows for %d draft rows", len(feats), len(tokens))
	}
	step := d.maxRows()
	for i := 0; i < len(tokens); i += step {
		j := min(i+step, len(tokens))
		c := &draftCall{tokens: tokens[i:j], feats: feats[i:j], base: d.n}
		for r := range c.tokens {
			c.parent = append(c.parent, r-1)
			c.extra = append(c.extra, nil)
		}
		if logits, hidden, err = d.run(c); err != nil {
			return nil, nil, err
		}
	}
	return logits, hidden, nil
}

// eagletTree drafts draft-len levels from root (see the top of the file)
// and returns the target's tree, root first, nodes in drafting order.
func (s *Staged) eagletTree(d *eagletDraft, root int32, rootLogits, rootHidden []float32, committed, maxSeq int) ([]eagletNode, error) {
	dl := s.p.Dialog
	nb := dl.NBranches
	tree := []eagletNode{{tok: root, parent: -1, prob: 1}}
	seqs := []*eagletSeq{{prob: 1, drafting: true, row: 0}}
	callLogits, callHidden := [][]float32{rootLogits}, [][]float32{rootHidden}
	for level := 0; level < dl.DraftLen; level++ {
		var levelProbs []float32
		n0 := len(seqs)
		for si := 0; si < n0; si++ {
			sq := seqs[si]
			if !sq.drafting || sq.row >= len(callLogits) {
				continue
			}
			cand, probs := topKProbs(callLogits[sq.row], nb)
			// The first candidate extends the sequence, the others copy it.
			branches := []*eagletSeq{sq}
			for b := 1; b < len(cand) && len(seqs) < maxSeq; b++ {
				cp := &eagletSeq{nodes: slices.Clone(sq.nodes), prob: sq.prob, drafting: true, row: sq.row, slots: slices.Clone(sq.slots)}
				seqs = append(seqs, cp)
				branches = append(branches, cp)
			}
			parent := 0
			if len(sq.nodes) > 0 {
				parent = sq.nodes[len(sq.nodes)-1]
			}
			for b, bs := range branches {
				p := probs[b] * sq.prob
				tree = append(tree, eagletNode{tok: d.h.d2t[cand[b]], parent: parent, prob: p})
				bs.nodes = append(bs.nodes, len(tree)-1)
				bs.prob = p
				levelProbs = append(levelProbs, p)
			}
		}
		if len(levelProbs) == 0 || level == dl.DraftLen-1 {
			break
		}
		sorted := slices.Clone(levelProbs)
		slices.SortFunc(sorted, descending)
		thr := sorted[min(nb, len(sorted))-1]
		// The sequences to expand, in sequence order, at most n-branches.
		call := &draftCall{base: committed}
		var chosen []*eagletSeq
		for _, sq := range seqs {
			if !sq.drafting {
				continue
			}
			last := tree[sq.nodes[len(sq.nodes)-1]]
			if sq.prob < thr || len(chosen) >= nb || last.tok == int32(s.e.cfg.EOS) {
				sq.drafting = false
				continue
			}
			feat := callHidden[len(callHidden)-1]
			if level > 0 {
				feat = callHidden[sq.row]
			}
			chosen = append(chosen, sq)
			call.tokens = append(call.tokens, last.tok)
			call.feats = append(call.feats, feat)
			call.parent = append(call.parent, -1)
			call.extra = append(call.extra, slices.Clone(sq.slots))
		}
		if len(chosen) == 0 {
			break
		}
		first := d.n
		lg, hs, err := d.run(call)
		if err != nil {
			return nil, err
		}
		for r, sq := range chosen {
			sq.row = r
			sq.slots = append(sq.slots, first+r)
		}
		callLogits, callHidden = lg, hs
	}
	return tree, nil
}

// topKProbs returns the k most likely draft ids of logits (the lowest id
// first on ties) with their softmax probabilities.
func topKProbs(logits []float32, k int) ([]int32, []float32) {
	ids := topK(logits, k)
	mx := logits[argmax(logits)]
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - mx))
	}
	probs := make([]float32, len(ids))
	for i, id := range ids {
		probs[i] = float32(math.Exp(float64(logits[id]-mx)) / sum)
	}
	return ids, probs
}

// pruneEagletTree keeps the max most probable nodes (Genie's
// pruneDraftTokenTree: those above the max-th probability, then those
// equal to it in order), re-indexing parents. A node's probability is at
// most its parent's, so kept nodes keep their ancestors.
func pruneEagletTree(tree []eagletNode, limit int) []eagletNode {
	if len(tree) <= limit {
		return tree
	}
	if limit <= 0 {
		return nil
	}
	probs := make([]float32, len(tree))
	for i, nd := range tree {
		probs[i] = nd.prob
	}
	slices.SortFunc(probs, descending)
	thr := probs[limit-1]
	above := 0
	for _, nd := range tree {
		if nd.prob > thr {
			above++
		}
	}
	newIdx := make([]int, len(tree))
	var out []eagletNode
	equal := 0
	for i, nd := range tree {
		keep := nd.prob > thr
		if nd.prob == thr {
			equal++
			keep = equal <= limit-above
		}
		if keep && nd.parent >= 0 && newIdx[nd.parent] < 0 {
			keep = false // an ancestor was cut (equal probabilities only)
		}
		if !keep {
			newIdx[i] = -1
			continue
		}
		newIdx[i] = len(out)
		if nd.parent >= 0 {
			nd.parent = newIdx[nd.parent]
		}
		out = append(out, nd)
	}
	return out
}

// EagletHead is the head's shape as an eaglet plan records it.
func (h *Eagle3) EagletHead() shard.EagletHead {
	c := h.cfg
	return shard.EagletHead{Hidden: c.Hidden, FFN: c.FFN, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		DraftVocab: c.DraftVocab, ExtractLayers: c.ExtractLayers}
}

// DraftGraph computes the eaglet draft graph name of plan p for head h
// from the given input surfaces (every input of the graph, by name, in the
// plan's layouts), exactly as SpeculateEaglet's draft calls do, and
// returns its output surfaces by name.
func (h *Eagle3) DraftGraph(p *shard.Plan, name string, in map[string][]float32) (map[string][]float32, error) {
	d, err := newEagletDraft(h, p)
	if err != nil {
		return nil, err
	}
	for _, v := range d.vars {
		if v.g.Name != name {
			continue
		}
		for _, t := range v.g.Inputs {
			src, ok := in[t.Name]
			if !ok || len(src) != len(v.bufs[t.Name].f) {
				return nil, fmt.Errorf("runtime: eaglet: draft graph %s: input %s: %d values given, want %d", name, t.Name, len(src), len(v.bufs[t.Name].f))
			}
			copy(v.bufs[t.Name].f, src)
		}
		if err := d.graph(v); err != nil {
			return nil, fmt.Errorf("runtime: eaglet: draft graph %s: %w", name, err)
		}
		out := map[string][]float32{}
		for _, t := range v.g.Outputs {
			out[t.Name] = slices.Clone(v.bufs[t.Name].f)
		}
		return out, nil
	}
	return nil, fmt.Errorf("runtime: eaglet: plan %s has no draft graph %s", p.Model.Name, name)
}

// EagletSpeculator decodes with Staged.SpeculateEaglet (for
// golden.SpeculativeThrough); the drafter and k it is given are unused.
type EagletSpeculator struct {
	Staged *Staged
	Head   *Eagle3
}

// Speculate is Staged.SpeculateEaglet.
func (x EagletSpeculator) Speculate(ctx context.Context, _ Drafter, prompt []int32, n, _ int) ([]int32, SpecStats, error) {
	return x.Staged.SpeculateEaglet(ctx, x.Head, prompt, n)
}

// DraftTokenMap is the head's d2t: the target id of each draft id
// (Genie's draft-token-map).
func (h *Eagle3) DraftTokenMap() []int32 { return slices.Clone(h.d2t) }

// descending orders draft probabilities from the largest.
func descending(a, b float32) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
