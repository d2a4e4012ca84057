package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// Eagle3Config holds an EAGLE-3 draft head's hyper-parameters (reference
// §7.2): one Llama decoder layer of width Hidden whose q, k and v read the
// concatenation [norm(embedding), norm(g)], fed by fc over three target
// hidden states.
type Eagle3Config struct {
	Hidden, FFN             int
	Heads, KVHeads, HeadDim int
	DraftVocab              int
	TargetHidden            int
	ExtractLayers           [3]int // target layers whose inputs are the features (low, mid, high)
	RMSEps                  float32
	RopeTheta               float32
	NormBeforeResidual      bool
	// RopeNeox rotates dimension i with i+D/2 (Hugging Face rotate_half, q/k
	// as in the checkpoint); false rotates adjacent pairs (GGUF, q/k rows
	// permuted by the converter).
	RopeNeox      bool
	ContextLength int // 0: the target's
}

// DefaultExtractLayers are EAGLE-3's feature layers for an N-layer target:
// the inputs of layers 2, N/2 and N−3 (clamped to the model and sorted,
// which matters only for models of fewer than 6 layers).
func DefaultExtractLayers(n int) [3]int {
	c := func(l int) int { return max(0, min(l, n)) }
	l := [3]int{c(2), c(n / 2), c(n - 3)}
	slices.Sort(l[:])
	return l
}

// Eagle3 is an EAGLE-3 draft head bound to its target Engine. Its weights
// are kept in their stored types and multiplied with the target's kernels.
type Eagle3 struct {
	t   *Engine
	cfg Eagle3Config

	fc                              *matrix // 3·Ht → H
	inNorm, hidNorm, postNorm, norm []float32
	wq, wk, wv, wo                  *matrix
	wgate, wup, wdown               *matrix
	head                            *matrix // H → draft vocab
	embd                            *matrix // own embeddings, or the target's
	d2t                             []int32 // draft id → target id
	ropeScale                       float32
	closer                          func() error
	tensors                         []*model.Tensor // as given, GGUF names
}

// Eagle3 tensor names (llama.cpp's eagle3 GGUF layout).
const (
	e3FC       = "fc.weight"
	e3D2T      = "d2t"
	e3Embd     = "token_embd.weight"
	e3InNorm   = "blk.0.attn_norm.weight"
	e3HidNorm  = "blk.0.attn_norm_2.weight"
	e3Q        = "blk.0.attn_q.weight"
	e3K        = "blk.0.attn_k.weight"
	e3V        = "blk.0.attn_v.weight"
	e3O        = "blk.0.attn_output.weight"
	e3PostNorm = "blk.0.ffn_norm.weight"
	e3Gate     = "blk.0.ffn_gate.weight"
	e3Up       = "blk.0.ffn_up.weight"
	e3Down     = "blk.0.ffn_down.weight"
	e3Norm     = "output_norm.weight"
	e3Head     = "output.weight"
)

// NewEagle3 binds an EAGLE-3 head given as tensors (GGUF names and ggml
// dims: fc.weight, d2t, blk.0.*, output_norm.weight, output.weight and
// optionally token_embd.weight) to its target. q and k are in GGUF (NORM
// rope) order. d2t holds absolute target ids (I32 or I64).
func NewEagle3(target *Engine, cfg Eagle3Config, tensors []*model.Tensor) (*Eagle3, error) {
	tc := target.cfg
	if cfg.TargetHidden == 0 {
		cfg.TargetHidden = tc.Hidden
	}
	if cfg.RMSEps == 0 {
		cfg.RMSEps = 1e-5
	}
	if cfg.RopeTheta == 0 {
		cfg.RopeTheta = 10000
	}
	if cfg.ContextLength <= 0 || cfg.ContextLength > target.ctxLen {
		cfg.ContextLength = target.ctxLen
	}
	switch {
	case cfg.Hidden <= 0 || cfg.FFN <= 0 || cfg.Heads <= 0 || cfg.KVHeads <= 0 || cfg.HeadDim <= 0 || cfg.DraftVocab <= 0:
		return nil, fmt.Errorf("runtime: eagle3: config %+v has a non-positive size", cfg)
	case cfg.Heads%cfg.KVHeads != 0:
		return nil, fmt.Errorf("runtime: eagle3: %d heads not a multiple of %d kv heads", cfg.Heads, cfg.KVHeads)
	case cfg.HeadDim%2 != 0:
		return nil, fmt.Errorf("runtime: eagle3: odd head dim %d", cfg.HeadDim)
	case cfg.TargetHidden != tc.Hidden:
		return nil, fmt.Errorf("runtime: eagle3: head expects target hidden size %d, target %s has %d", cfg.TargetHidden, target.name, tc.Hidden)
	}
	for _, l := range cfg.ExtractLayers {
		if l < 0 || l > tc.Layers {
			return nil, fmt.Errorf("runtime: eagle3: extract layer %d outside the target's [0, %d]", l, tc.Layers)
		}
	}
	if !(cfg.ExtractLayers[0] <= cfg.ExtractLayers[1] && cfg.ExtractLayers[1] <= cfg.ExtractLayers[2]) {
		return nil, fmt.Errorf("runtime: eagle3: extract layers %v are not ascending", cfg.ExtractLayers)
	}
	byName := map[string]*model.Tensor{}
	for _, t := range tensors {
		byName[t.Name] = t
	}
	h := &Eagle3{t: target, cfg: cfg, tensors: tensors}
	h.ropeScale = float32(math.Pow(float64(cfg.RopeTheta), -2/float64(cfg.HeadDim)))
	mat := func(name string, cols, rows int) (*matrix, error) {
		t := byName[name]
		if t == nil {
			return nil, fmt.Errorf("runtime: eagle3: missing tensor %q", name)
		}
		if len(t.Dims) != 2 || t.Dims[0] != int64(cols) || t.Dims[1] != int64(rows) {
			return nil, fmt.Errorf("runtime: eagle3: tensor %q has dims %v, want [%d %d]", name, t.Dims, cols, rows)
		}
		data, err := t.Data()
		if err != nil {
			return nil, fmt.Errorf("runtime: eagle3: tensor %q: %w", name, err)
		}
		m, err := newMatrix(name, t.Type, cols, rows, data)
		if err != nil {
			return nil, fmt.Errorf("runtime: eagle3: %w", err)
		}
		return m, nil
	}
	vec := func(name string, n int) ([]float32, error) {
		t := byName[name]
		if t == nil {
			return nil, fmt.Errorf("runtime: eagle3: missing tensor %q", name)
		}
		if t.Elements() != int64(n) {
			return nil, fmt.Errorf("runtime: eagle3: tensor %q has %d elements, want %d", name, t.Elements(), n)
		}
		v, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("runtime: eagle3: tensor %q: %w", name, err)
		}
		if len(v) != n {
			return nil, fmt.Errorf("runtime: eagle3: tensor %q decoded to %d values, want %d", name, len(v), n)
		}
		return v, nil
	}
	H, qd, kvd := cfg.Hidden, cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	var err error
	for _, m := range []struct {
		dst        **matrix
		name       string
		cols, rows int
	}{
		{&h.fc, e3FC, 3 * cfg.TargetHidden, H},
		{&h.wq, e3Q, 2 * H, qd}, {&h.wk, e3K, 2 * H, kvd}, {&h.wv, e3V, 2 * H, kvd}, {&h.wo, e3O, qd, H},
		{&h.wgate, e3Gate, H, cfg.FFN}, {&h.wup, e3Up, H, cfg.FFN}, {&h.wdown, e3Down, cfg.FFN, H},
		{&h.head, e3Head, H, cfg.DraftVocab},
	} {
		if *m.dst, err = mat(m.name, m.cols, m.rows); err != nil {
			return nil, err
		}
	}
	for _, v := range []struct {
		dst  *[]float32
		name string
	}{{&h.inNorm, e3InNorm}, {&h.hidNorm, e3HidNorm}, {&h.postNorm, e3PostNorm}, {&h.norm, e3Norm}} {
		if *v.dst, err = vec(v.name, H); err != nil {
			return nil, err
		}
	}
	if byName[e3Embd] != nil {
		if h.embd, err = mat(e3Embd, H, tc.VocabSize); err != nil {
			return nil, err
		}
	} else {
		if H != tc.Hidden {
			return nil, fmt.Errorf("runtime: eagle3: no %s and hidden %d differs from the target's %d, so the target's embeddings cannot be used", e3Embd, H, tc.Hidden)
		}
		h.embd = target.embd
	}
	if h.d2t, err = readD2T(byName[e3D2T], cfg.DraftVocab, tc.VocabSize); err != nil {
		return nil, err
	}
	return h, nil
}

func readD2T(t *model.Tensor, n, vocab int) ([]int32, error) {
	if t == nil {
		if n != vocab {
			return nil, fmt.Errorf("runtime: eagle3: no %s tensor, and the draft vocabulary (%d) is not the target's (%d)", e3D2T, n, vocab)
		}
		d := make([]int32, n)
		for i := range d {
			d[i] = int32(i)
		}
		return d, nil
	}
	if t.Elements() != int64(n) {
		return nil, fmt.Errorf("runtime: eagle3: tensor %q has %d elements, want %d (the draft vocabulary)", e3D2T, t.Elements(), n)
	}
	b, err := t.Data()
	if err != nil {
		return nil, fmt.Errorf("runtime: eagle3: tensor %q: %w", e3D2T, err)
	}
	var size int
	switch t.Type {
	case gguf.I64:
		size = 8
	case gguf.I32:
		size = 4
	default:
		return nil, fmt.Errorf("runtime: eagle3: tensor %q has type %s, want I64 or I32", e3D2T, t.Type)
	}
	if len(b) != n*size {
		return nil, fmt.Errorf("runtime: eagle3: tensor %q holds %d bytes, want %d", e3D2T, len(b), n*size)
	}
	d := make([]int32, n)
	for i := range d {
		var v int64
		if size == 8 {
			v = int64(binary.LittleEndian.Uint64(b[8*i:]))
		} else {
			v = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
		if v < 0 || v >= int64(vocab) {
			return nil, fmt.Errorf("runtime: eagle3: tensor %q: draft id %d maps to %d, outside the target vocabulary [0, %d)", e3D2T, i, v, vocab)
		}
		d[i] = int32(v)
	}
	return d, nil
}

// Tensors returns the head's tensors in llama.cpp's eagle3 GGUF layout
// (names and ggml dims), for exporting its graphs.
func (h *Eagle3) Tensors() []*model.Tensor { return h.tensors }

// Config returns the head's hyper-parameters.
func (h *Eagle3) Config() Eagle3Config { return h.cfg }

// Close releases the file a loaded head maps (a no-op otherwise).
func (h *Eagle3) Close() error {
	if h.closer != nil {
		return h.closer()
	}
	return nil
}

// Drafter returns a new drafting state for one sequence.
func (h *Eagle3) Drafter() *Eagle3Drafter { return &Eagle3Drafter{h: h} }

// Eagle3Drafter is one sequence's EAGLE-3 drafting state: the head's KV
// cache over the committed positions (built from target features only,
// as EAGLE keeps its "stable" KV) and the features not yet consumed.
type Eagle3Drafter struct {
	h          *Eagle3
	k, v       [][]float32 // per KV head, [slot][head_dim], as a State's cache
	n          int         // slots in the cache
	stable     int         // slots built from target features
	feats      [][]float32
	toks       []int32 // token following each pending feature row (the last one comes with Propose)
	in, mid    acts
	x, g, e, q []float32
	att, hid   []float32
	ff1, ff2   []float32
	logits     []float32
	cos, sin   []float32
	kt, vt     []float32 // the step's K and V rows, [token][kv_heads·head_dim]
	attn       attnTask
}

// FeatureLayers are the head's extract layers.
func (d *Eagle3Drafter) FeatureLayers() []int { return d.h.cfg.ExtractLayers[:] }

// Start resets the drafter for a sequence whose prompt the target has
// processed.
func (d *Eagle3Drafter) Start(prompt []int32, feats [][]float32) error {
	if len(feats) != len(prompt) {
		return fmt.Errorf("runtime: eagle3: %d feature rows for a prompt of %d tokens", len(feats), len(prompt))
	}
	d.cutKV(0)
	d.n, d.stable = 0, 0
	d.feats = append(d.feats[:0], feats...)
	d.toks = append(d.toks[:0], prompt[1:]...)
	return nil
}

// Propose consumes the pending target features (row p pairs the features
// at position p with the token at p+1, the last of which is last), then
// chains k−1 more steps on the head's own hidden state.
func (d *Eagle3Drafter) Propose(last int32, k int) ([]int32, error) {
	h := d.h
	c := &h.cfg
	if k < 1 {
		return nil, nil
	}
	if err := d.truncate(d.stable); err != nil {
		return nil, err
	}
	toks := append(d.toks, last)
	if len(toks) != len(d.feats) {
		return nil, fmt.Errorf("runtime: eagle3: %d pending feature rows for %d tokens", len(d.feats), len(toks))
	}
	k = min(k, c.ContextLength-d.n-len(toks)+1)
	if k < 1 {
		return nil, nil
	}
	t := len(toks)
	H := c.Hidden
	nf := 3 * c.TargetHidden
	// g = fc(features), one row per pending position.
	fx := grow(&d.x, t*nf)
	for i, f := range d.feats {
		if len(f) != nf {
			return nil, fmt.Errorf("runtime: eagle3: feature row of %d values, want %d", len(f), nf)
		}
		copy(fx[i*nf:], f)
	}
	d.in.reset(fx, t, nf)
	g := grow(&d.g, t*H)
	if err := h.t.matmul(h.fc, &d.in, g); err != nil {
		return nil, err
	}
	out, err := d.step(toks, g)
	if err != nil {
		return nil, err
	}
	d.stable = d.n
	d.feats, d.toks = d.feats[:0], d.toks[:0]
	draft := make([]int32, 0, k)
	draft = append(draft, out)
	for len(draft) < k {
		// g is the previous step's pre-norm output (its last row).
		prev := append([]float32(nil), d.hid[len(d.hid)-H:]...)
		if out, err = d.step(draft[len(draft)-1:], prev); err != nil {
			return nil, err
		}
		draft = append(draft, out)
	}
	return draft, nil
}

// Commit drops the chain rows from the head's cache and queues the target
// features of the accepted positions.
func (d *Eagle3Drafter) Commit(last int32, draft []int32, accepted int, feats [][]float32) error {
	if len(feats) != accepted+1 {
		return fmt.Errorf("runtime: eagle3: %d feature rows for %d accepted positions", len(feats), accepted+1)
	}
	if err := d.truncate(d.stable); err != nil {
		return err
	}
	if len(d.feats) != 0 {
		// Propose proposed nothing (context end): last is still pending.
		d.toks = append(d.toks, last)
	}
	d.feats = append(d.feats, feats...)
	d.toks = append(d.toks, draft[:accepted]...)
	return nil
}

func (d *Eagle3Drafter) truncate(n int) error {
	if n > d.n {
		return fmt.Errorf("runtime: eagle3: truncate to %d slots, cache holds %d", n, d.n)
	}
	d.cutKV(n)
	d.n = n
	return nil
}

// cutKV drops the cache slots from n on.
func (d *Eagle3Drafter) cutKV(n int) {
	hd := d.h.cfg.HeadDim
	for g := range d.k {
		d.k[g], d.v[g] = d.k[g][:n*hd], d.v[g][:n*hd]
	}
}

// step runs the decoder layer on T rows (tokens and g, T·Hidden), appends
// their K and V to the cache at the next positions, leaves the pre-norm
// outputs in d.hid, and returns the target id proposed after the last row.
func (d *Eagle3Drafter) step(toks []int32, g []float32) (int32, error) {
	h := d.h
	c := &h.cfg
	e := h.t
	t, H := len(toks), c.Hidden
	nh, nkv, hd := c.Heads, c.KVHeads, c.HeadDim
	qd, kvd := nh*hd, nkv*hd
	if d.n+t > c.ContextLength {
		return 0, fmt.Errorf("runtime: eagle3: %d positions exceed the context length %d", d.n+t, c.ContextLength)
	}
	emb := grow(&d.e, t*H)
	for i, tok := range toks {
		if err := e.checkToken(tok); err != nil {
			return 0, err
		}
		if err := h.embd.decodeRow(int(tok), emb[i*H:(i+1)*H]); err != nil {
			return 0, fmt.Errorf("runtime: eagle3: %w", err)
		}
	}
	// x = [norm(embedding) | norm(g)], embedding first.
	x := grow(&d.x, t*2*H)
	for i := 0; i < t; i++ {
		rmsNorm(x[i*2*H:i*2*H+H], emb[i*H:(i+1)*H], h.inNorm, c.RMSEps)
		rmsNorm(x[i*2*H+H:(i+1)*2*H], g[i*H:(i+1)*H], h.hidNorm, c.RMSEps)
	}
	hid := grow(&d.hid, t*H)
	if c.NormBeforeResidual {
		for i := 0; i < t; i++ {
			copy(hid[i*H:(i+1)*H], x[i*2*H+H:(i+1)*2*H])
		}
	} else {
		copy(hid, g[:t*H])
	}
	d.in.reset(x, t, 2*H)
	q := grow(&d.q, t*qd)
	if err := e.matmul(h.wq, &d.in, q); err != nil {
		return 0, err
	}
	past := d.n
	kk, vv := grow(&d.kt, t*kvd), grow(&d.vt, t*kvd)
	if err := e.matmul(h.wk, &d.in, kk); err != nil {
		return 0, err
	}
	if err := e.matmul(h.wv, &d.in, vv); err != nil {
		return 0, err
	}
	half := hd / 2
	cos, sin := grow(&d.cos, half), grow(&d.sin, half)
	for i := 0; i < t; i++ {
		d.ropeTable(int32(past+i), cos, sin)
		for j := 0; j < nh; j++ {
			rope(q[(i*nh+j)*hd:], cos, sin, c.RopeNeox)
		}
		for j := 0; j < nkv; j++ {
			rope(kk[(i*nkv+j)*hd:], cos, sin, c.RopeNeox)
		}
	}
	d.n = past + t
	// The rotated K and V go into the head-major cache, and attention is
	// the target's (attendBlock: the per-pair arithmetic of a plain loop).
	if d.k == nil {
		d.k, d.v = make([][]float32, nkv), make([][]float32, nkv)
	}
	for g := 0; g < nkv; g++ {
		d.k[g] = growCache(d.k[g], d.n*hd)
		d.v[g] = growCache(d.v[g], d.n*hd)
		kh, vh := d.k[g][past*hd:], d.v[g][past*hd:]
		for i := 0; i < t; i++ {
			copy(kh[i*hd:(i+1)*hd], kk[(i*nkv+g)*hd:(i*nkv+g+1)*hd])
			copy(vh[i*hd:(i+1)*hd], vv[(i*nkv+g)*hd:(i*nkv+g+1)*hd])
		}
	}
	att := grow(&d.att, t*qd)
	clear(att)
	blocks := (t + attnTokens - 1) / attnTokens
	d.attn = attnTask{qs: q, k: d.k, v: d.v, att: att, t: t, nh: nh, nkv: nkv, group: nh / nkv,
		d: hd, past: past, scale: float32(1 / math.Sqrt(float64(hd)))}
	e.parallel(blocks*nkv, t*nh*d.n*hd, &d.attn)
	d.attn = attnTask{}
	d.mid.reset(att, t, qd)
	proj := grow(&d.ff2, t*H)
	if err := e.matmul(h.wo, &d.mid, proj); err != nil {
		return 0, err
	}
	for i := range hid {
		hid[i] += proj[i]
	}
	// MLP on norm(h1).
	xn := grow(&d.e, t*H) // the embeddings are no longer needed
	for i := 0; i < t; i++ {
		rmsNorm(xn[i*H:(i+1)*H], hid[i*H:(i+1)*H], h.postNorm, c.RMSEps)
	}
	d.in.reset(xn, t, H)
	ga := grow(&d.ff1, t*c.FFN)
	if err := e.matmul(h.wgate, &d.in, ga); err != nil {
		return 0, err
	}
	up := grow(&d.q, t*c.FFN)
	if err := e.matmul(h.wup, &d.in, up); err != nil {
		return 0, err
	}
	e.siluMul(ga, up)
	d.mid.reset(ga, t, c.FFN)
	if err := e.matmul(h.wdown, &d.mid, proj); err != nil {
		return 0, err
	}
	for i := range hid {
		hid[i] += proj[i]
	}
	// Draft logits for the last row only.
	rmsNorm(xn[:H], hid[(t-1)*H:], h.norm, c.RMSEps)
	d.in.reset(xn[:H], 1, H)
	logits := grow(&d.logits, c.DraftVocab)
	if err := e.matmul(h.head, &d.in, logits); err != nil {
		return 0, err
	}
	return h.d2t[argmax(logits)], nil
}

// ropeTable is ggml's rope cache for the head's own theta and width.
func (d *Eagle3Drafter) ropeTable(p int32, cos, sin []float32) {
	theta := float32(p)
	for i := range cos {
		cos[i] = float32(math.Cos(float64(theta)))
		sin[i] = float32(math.Sin(float64(theta)))
		theta *= d.h.ropeScale
	}
}
