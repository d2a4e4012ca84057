package runtime

import (
	"fmt"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// MTP is a Qwen3.5 multi-token-prediction head (reference §7.3) bound to
// its target: fc over [enorm(embedding), hnorm(h)] with h the target's
// final normed hidden state, one full-attention decoder block of the
// target's own kind, and the target's (or the head's) norm and lm_head.
// The block runs on an Engine of its own, so its arithmetic is the
// runtime's.
type MTP struct {
	t            *Engine
	blk          *Engine // one attention layer; output_norm = shared_head_norm
	fc           *matrix // 2H → H
	enorm, hnorm []float32
}

// LoadMTP reads the first MTP block of a qwen35 or qwen3next GGUF (blk.L.nextn.* and
// the attention block blk.L.* after the main stack, which package model
// skips) for target, the Engine of m.
func LoadMTP(target *Engine, m *model.Model) (*MTP, error) {
	c := m.Config
	if !c.Arch.Features().MTP {
		return nil, fmt.Errorf("runtime: mtp: %s: architecture %s has no MTP head", m.Path, c.Arch)
	}
	if m.Format != "gguf" {
		return nil, fmt.Errorf("runtime: mtp: %s: MTP heads are read from GGUF files", m.Path)
	}
	if n, _ := m.Metadata.Int(string(c.Arch) + ".nextn_predict_layers"); n < 1 {
		return nil, fmt.Errorf("runtime: mtp: %s: no MTP block (%s.nextn_predict_layers is not set)", m.Path, c.Arch)
	}
	f, err := gguf.Open(m.Path)
	if err != nil {
		return nil, err
	}
	// The tensors' bytes are copied: the head outlives this mapping.
	prefix := fmt.Sprintf("blk.%d.", c.Layers)
	var ts []*model.Tensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if !strings.HasPrefix(ti.Name, prefix) {
			continue
		}
		data, err := f.Data(ti)
		if err != nil {
			f.Close()
			return nil, err
		}
		ts = append(ts, model.NewTensor(ti.Name, ti.Dims, ti.Type, append([]byte(nil), data...)))
	}
	f.Close()
	return NewMTP(target, m, ts)
}

// NewMTP binds an MTP block given as tensors named blk.L.* (L = the
// target's layer count) to target, the Engine of m.
func NewMTP(target *Engine, m *model.Model, tensors []*model.Tensor) (*MTP, error) {
	c := m.Config
	prefix := fmt.Sprintf("blk.%d.", c.Layers)
	byName := map[string]*model.Tensor{}
	for _, t := range tensors {
		byName[t.Name] = t
	}
	get := func(name string) (*model.Tensor, error) {
		t := byName[prefix+name]
		if t == nil {
			return nil, fmt.Errorf("runtime: mtp: %s: missing tensor %q", m.Path, prefix+name)
		}
		return t, nil
	}
	// The block as a one-layer model: its attention block renamed to
	// blk.0, the target's embeddings, shared_head_norm as the final norm
	// and the target's head (or the block's own).
	bc := c
	bc.Layers, bc.LayerKinds, bc.TiedEmbeddings = 1, []model.LayerKind{model.Attention}, false
	var bts []*model.Tensor
	for _, s := range model.ExpectedTensors(bc) {
		var t *model.Tensor
		var err error
		switch name := s.Name; {
		case name == "token_embd.weight":
			if t = byName[prefix+"nextn.embed_tokens.weight"]; t == nil {
				t = m.Tensor(name)
			}
		case name == "output_norm.weight":
			t, err = get("nextn.shared_head_norm.weight")
		case name == "output.weight":
			if t = byName[prefix+"nextn.shared_head_head.weight"]; t == nil {
				if t = m.Tensor("output.weight"); t == nil {
					t = m.Tensor("token_embd.weight")
				}
			}
		case strings.HasPrefix(name, "blk.0."):
			t, err = get(strings.TrimPrefix(name, "blk.0."))
		default:
			if s.Optional {
				continue
			}
			t = m.Tensor(name)
		}
		if err != nil {
			return nil, err
		}
		if t == nil {
			if s.Optional {
				continue
			}
			return nil, fmt.Errorf("runtime: mtp: %s: no tensor for %s", m.Path, s.Name)
		}
		bts = append(bts, renamed(t, s.Name))
	}
	bm, err := model.New(bc, bts)
	if err != nil {
		return nil, fmt.Errorf("runtime: mtp: %s: %w", m.Path, err)
	}
	bm.Path = m.Path + " (mtp)"
	blk, err := New(bm, Options{Threads: target.threads, Context: target.ctxLen, Batch: target.batch, KVF16: target.kvF16})
	if err != nil {
		return nil, err
	}
	h := &MTP{t: target, blk: blk}
	H := c.Hidden
	fcT, err := get("nextn.eh_proj.weight")
	if err != nil {
		return nil, err
	}
	if len(fcT.Dims) != 2 || fcT.Dims[0] != int64(2*H) || fcT.Dims[1] != int64(H) {
		return nil, fmt.Errorf("runtime: mtp: %s: tensor %q has dims %v, want [%d %d]", m.Path, fcT.Name, fcT.Dims, 2*H, H)
	}
	data, err := fcT.Data()
	if err != nil {
		return nil, fmt.Errorf("runtime: mtp: %s: tensor %q: %w", m.Path, fcT.Name, err)
	}
	if h.fc, err = newMatrix(fcT.Name, fcT.Type, 2*H, H, data); err != nil {
		return nil, fmt.Errorf("runtime: mtp: %s: %w", m.Path, err)
	}
	for _, v := range []struct {
		dst  *[]float32
		name string
	}{{&h.enorm, "nextn.enorm.weight"}, {&h.hnorm, "nextn.hnorm.weight"}} {
		t, err := get(v.name)
		if err != nil {
			return nil, err
		}
		if t.Elements() != int64(H) {
			return nil, fmt.Errorf("runtime: mtp: %s: tensor %q has %d elements, want %d", m.Path, t.Name, t.Elements(), H)
		}
		if *v.dst, err = t.Float32(); err != nil {
			return nil, fmt.Errorf("runtime: mtp: %s: tensor %q: %w", m.Path, t.Name, err)
		}
	}
	return h, nil
}

// Drafter returns a new drafting state for one sequence.
func (h *MTP) Drafter() *MTPDrafter { return &MTPDrafter{h: h, st: h.blk.NewState()} }

// MTPDrafter is one sequence's MTP drafting state: the block's KV cache
// over committed positions (built from target features only) and the
// target features not yet consumed.
type MTPDrafter struct {
	h      *MTP
	st     *State
	stable int
	feats  [][]float32
	toks   []int32
	e      []float32
	cat    []float32
	in     acts
	logits []float32
}

// FeatureLayers asks for the last layer's output; the drafter applies the
// target's final norm to it.
func (d *MTPDrafter) FeatureLayers() []int { return []int{d.h.t.cfg.Layers} }

// Start resets the drafter for a sequence whose prompt the target has
// processed.
func (d *MTPDrafter) Start(prompt []int32, feats [][]float32) error {
	if len(feats) != len(prompt) {
		return fmt.Errorf("runtime: mtp: %d feature rows for a prompt of %d tokens", len(feats), len(prompt))
	}
	d.st.Reset()
	d.stable = 0
	d.feats = append(d.feats[:0], feats...)
	d.toks = append(d.toks[:0], prompt[1:]...)
	return nil
}

// Propose consumes the pending features (row p pairs the target's normed
// final hidden state at p with the token at p+1) and chains k−1 steps on
// the block's own normed output.
func (d *MTPDrafter) Propose(last int32, k int) ([]int32, error) {
	h, t := d.h, d.h.t
	H := t.cfg.Hidden
	if k < 1 {
		return nil, nil
	}
	if err := d.st.Truncate(d.stable); err != nil {
		return nil, err
	}
	toks := append(d.toks, last)
	if len(toks) != len(d.feats) {
		return nil, fmt.Errorf("runtime: mtp: %d pending feature rows for %d tokens", len(d.feats), len(toks))
	}
	k = min(k, h.blk.ctxLen-d.st.Len()-len(toks)+1)
	if k < 1 {
		return nil, nil
	}
	hs := make([]float32, len(toks)*H)
	for i, f := range d.feats {
		if len(f) != H {
			return nil, fmt.Errorf("runtime: mtp: feature row of %d values, want %d", len(f), H)
		}
		// h_p is the target's final hidden state after its output norm.
		rmsNorm(hs[i*H:(i+1)*H], f, t.outNorm, t.cfg.RMSEps)
	}
	out, next, err := d.step(toks, hs)
	if err != nil {
		return nil, err
	}
	d.stable = d.st.Len()
	d.feats, d.toks = d.feats[:0], d.toks[:0]
	draft := append(make([]int32, 0, k), next)
	for len(draft) < k {
		if out, next, err = d.step(draft[len(draft)-1:], out); err != nil {
			return nil, err
		}
		draft = append(draft, next)
	}
	return draft, nil
}

// Commit drops the chain rows and queues the accepted positions' features.
func (d *MTPDrafter) Commit(last int32, draft []int32, accepted int, feats [][]float32) error {
	if len(feats) != accepted+1 {
		return fmt.Errorf("runtime: mtp: %d feature rows for %d accepted positions", len(feats), accepted+1)
	}
	if err := d.st.Truncate(d.stable); err != nil {
		return err
	}
	if len(d.feats) != 0 {
		d.toks = append(d.toks, last) // Propose proposed nothing: last is still pending
	}
	d.feats = append(d.feats, feats...)
	d.toks = append(d.toks, draft[:accepted]...)
	return nil
}

// step runs the block on rows (token, hidden): x = fc([enorm(embedding),
// hnorm(hidden)]), one attention layer at the next positions, then the
// shared head. It returns the last row's normed output (the next chain
// step's hidden) and the token proposed from it.
func (d *MTPDrafter) step(toks []int32, hid []float32) ([]float32, int32, error) {
	h, t := d.h, d.h.t
	c := &t.cfg
	H, n := c.Hidden, len(toks)
	e := grow(&d.e, n*H)
	if err := t.Embed(toks, e); err != nil {
		return nil, 0, err
	}
	cat := grow(&d.cat, n*2*H)
	for i := 0; i < n; i++ {
		rmsNorm(cat[i*2*H:i*2*H+H], e[i*H:(i+1)*H], h.enorm, c.RMSEps)
		rmsNorm(cat[i*2*H+H:(i+1)*2*H], hid[i*H:(i+1)*H], h.hnorm, c.RMSEps)
	}
	d.in.reset(cat, n, 2*H)
	x := make([]float32, n*H)
	if err := t.matmul(h.fc, &d.in, x); err != nil {
		return nil, 0, err
	}
	if err := d.st.RunLayers(0, 1, x, nil, nil); err != nil {
		return nil, 0, err
	}
	lastRow := x[(n-1)*H:]
	logits := grow(&d.logits, c.VocabSize)
	if err := d.st.Head(lastRow, logits); err != nil {
		return nil, 0, err
	}
	out := make([]float32, H)
	rmsNorm(out, lastRow, h.blk.outNorm, c.RMSEps)
	return out, Argmax(logits), nil
}

// renamed is t under another name (same bytes, read when needed).
func renamed(t *model.Tensor, name string) *model.Tensor {
	return model.LazyTensor(name, t.Dims, t.Type, t.Data)
}
