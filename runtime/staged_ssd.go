package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// Genie's ssd-q1 dialog through a plan (qnn-genie.md §1.4; QAIRT 2.40
// qualla dialogs/ssd-q1.cpp). The forecast prefix is restored as the first
// forecast-prefix cache entries and never enters the token history. Rows
// before the "kv-prefix-offset" of a call do not see the prefix: the
// prompt, the token after it and every draft-tree node; forecast rows
// (token ids vocab…vocab+len(branches)−1, embedded from the forecast
// embeddings) do. Positions are tree depths after the committed tokens,
// the prefix not counted.
//
// A step submits the draft tree (root = the last emitted token, level d
// holds branches[d] children per node of level d−1, all drawn from the top
// branches[d]+1 candidates of forecast row d of the last accepted node,
// skipping a child equal to its parent) and then len(branches) chained
// forecast tokens per node. The accepted nodes are the path whose tokens
// greedy decoding would emit; the selection mask keeps exactly them, so
// the tokens are Greedy's bit for bit. The forecast rows change only which
// drafts are proposed.

// SSDOptions are what an ssd-q1 decode needs beyond the plan's dialog.
type SSDOptions struct {
	// Forecast holds the forecast-token embeddings: the plan's
	// forecast-token-count rows of Hidden values; token vocab+i embeds
	// as row i.
	Forecast []float32
	// PrefixKeys and PrefixValues hold the forecast-prefix KV of every
	// layer as [KVHeads][forecast-prefix][HeadDim] values; nil (or a nil
	// layer) means zeros, as a placeholder prefix restores.
	PrefixKeys, PrefixValues [][]float32
}

// stagedSSD is the ssd-q1 state of a Staged.
type stagedSSD struct {
	forecast []float32 // embeddings of ids ≥ vocab, while an SSD decode runs
	prefix   int       // restored prefix entries (not in the history)
	opts     *SSDOptions
	loaded   bool // the prefix is in the KV variant's _in tensors
}

// embed writes the embeddings of ids into x: the model's table, and the
// forecast embeddings for ids past the vocabulary during an SSD decode.
func (s *Staged) embed(ids []int32, x []float32) error {
	vocab, h := s.e.cfg.VocabSize, s.e.cfg.Hidden
	fc := s.ssd.forecast
	if fc == nil || !slices.ContainsFunc(ids, func(t int32) bool { return int(t) >= vocab }) {
		return s.e.Embed(ids, x)
	}
	for i, t := range ids {
		if f := int(t) - vocab; f >= 0 && f < len(fc)/h {
			copy(x[i*h:(i+1)*h], fc[f*h:(f+1)*h])
			continue
		}
		if err := s.e.Embed(ids[i:i+1], x[i*h:(i+1)*h]); err != nil {
			return err
		}
	}
	return nil
}

// ssdTree is the dialog's attention map (gen_attention_map): parent row
// of every row, draft nodes first, then len(branches) chained forecast
// rows per node.
type ssdTree struct {
	branches []int
	parent   []int
	nodes    int   // draft nodes (root included)
	perLevel []int // nodes per draft level below the root
}

func newSSDTree(branches []int) *ssdTree {
	t := &ssdTree{branches: branches, parent: []int{-1}}
	start := 0
	for _, b := range branches {
		end := len(t.parent)
		for node := start; node < end; node++ {
			for range b {
				t.parent = append(t.parent, node)
			}
		}
		t.perLevel = append(t.perLevel, len(t.parent)-end)
		start = end
	}
	t.nodes = len(t.parent)
	for node := 0; node < t.nodes; node++ {
		t.parent = append(t.parent, node)
		for d := 1; d < len(branches); d++ {
			t.parent = append(t.parent, len(t.parent)-1)
		}
	}
	return t
}

// draft builds the next draft tree (build_sample_tree): root is the last
// emitted token, level d's candidates the top branches[d]+1 tokens of
// rows[first+d].
func (t *ssdTree) draft(root int32, rows [][]float32, first int) []int32 {
	tree := []int32{root}
	level, inLevel, next := 0, 0, 0
	var cand []int32
	for cur := 1; level < len(t.branches); cur++ {
		p := t.parent[cur]
		if p != t.parent[cur-1] {
			next = 0
		}
		if inLevel == 0 {
			cand = topK(rows[first+level], t.branches[level]+1)
		}
		// A child repeating its parent is unlikely; Genie skips it.
		if cand[next] == tree[p] {
			next++
		}
		tree = append(tree, cand[next])
		next++
		if inLevel++; inLevel == t.perLevel[level] {
			level, inLevel = level+1, 0
		}
	}
	return tree
}

// topK returns the indices of the k largest logits, largest first (the
// lower index first on ties).
func topK(logits []float32, k int) []int32 {
	idx := make([]int32, 0, k+1)
	for i, v := range logits {
		if len(idx) == k && v <= logits[idx[k-1]] {
			continue
		}
		j := len(idx)
		for j > 0 && v > logits[idx[j-1]] {
			j--
		}
		idx = slices.Insert(idx, j, int32(i))
		if len(idx) > k {
			idx = idx[:k]
		}
	}
	return idx
}

// SpeculateSSD decodes n tokens after prompt with the plan's ssd-q1
// dialog, as Genie runs it on the plan's graphs: the forecast prefix
// restored into the cache, the prompt not seeing it, a first call of the
// first token and the forecast tokens, then one call per step of the
// draft tree and its forecast rows, committed with a selection mask of the
// accepted path. The tokens equal Greedy's (end-of-generation tokens are
// not special); the stats count the first call as a window without
// drafts.
func (s *Staged) SpeculateSSD(ctx context.Context, o SSDOptions, prompt []int32, n int) ([]int32, SpecStats, error) {
	var st SpecStats
	c := &s.e.cfg
	d := &s.p.Dialog
	switch {
	case d.Type != shard.SSD:
		return nil, st, fmt.Errorf("runtime: staged: plan %s has dialog %q, not ssd-q1", s.p.Model.Name, d.Type)
	case c.Hybrid():
		return nil, st, fmt.Errorf("runtime: staged: ssd-q1 on a model with Gated DeltaNet layers: its draft tree cannot roll recurrent state back (%s)", shard.RuleGDNSpec)
	case len(d.Branches) == 0:
		return nil, st, fmt.Errorf("runtime: staged: ssd-q1 plan %s has no branches", s.p.Model.Name)
	case len(o.Forecast) != d.ForecastTokenCount*c.Hidden:
		return nil, st, fmt.Errorf("runtime: staged: ssd-q1: %d forecast embedding values, the plan needs forecast-token-count %d × hidden %d", len(o.Forecast), d.ForecastTokenCount, c.Hidden)
	case len(prompt) == 0:
		return nil, st, fmt.Errorf("runtime: empty prompt")
	case n <= 0:
		return nil, st, nil
	}
	for _, t := range prompt {
		if err := s.e.checkToken(t); err != nil {
			return nil, st, err
		}
	}
	if err := s.checkPrefix(&o); err != nil {
		return nil, st, err
	}
	s.Reset()
	s.ssd = stagedSSD{forecast: o.Forecast, prefix: d.ForecastPrefix, opts: &o}
	s.nValid = d.ForecastPrefix
	defer func() {
		s.Reset()
		s.ssd = stagedSSD{}
	}()
	t0 := time.Now()

	// The prompt, in as many calls as the plan needs, none seeing the
	// prefix (kv-prefix-offset = the prompt).
	var last []float32
	for rest := prompt; len(rest) > 0; {
		v, rows, err := s.ssdVariant(len(rest), false)
		if err != nil {
			return nil, st, err
		}
		lg, err := s.ssdCall(v, rest[:rows], nil, rows)
		if err != nil {
			return nil, st, err
		}
		if err := s.Commit(nil); err != nil {
			return nil, st, err
		}
		last, rest = lg[rows-1], rest[rows:]
	}
	st.TargetCalls = 1
	out := []int32{Argmax(last)}
	t1 := time.Now()
	st.PromptSeconds = t1.Sub(t0).Seconds()

	// The first step: the first token and one chain of forecast tokens
	// (kv-prefix-offset 1); only the token is kept.
	draftLen := len(d.Branches)
	vocab := int32(c.VocabSize)
	rows := []int32{out[0]}
	for i := range draftLen {
		rows = append(rows, vocab+int32(i))
	}
	sel := make([]bool, len(rows))
	sel[0] = true
	lg, err := s.ssdStep(rows, nil, 1, sel)
	if err != nil {
		return nil, st, err
	}
	st.Windows++
	tree := newSSDTree(d.Branches)
	out = append(out, Argmax(lg[0]))
	draft := tree.draft(out[len(out)-1], lg, 1)
	fcRows := make([]int32, 0, tree.nodes*draftLen)
	for range tree.nodes {
		for i := range draftLen {
			fcRows = append(fcRows, vocab+int32(i))
		}
	}
	for len(out) < n {
		if err := ctx.Err(); err != nil {
			return nil, st, err
		}
		rows := append(slices.Clone(draft), fcRows...)
		lg, err := s.ssdVerify(tree, rows, &st)
		if err != nil {
			return nil, st, err
		}
		out = append(out, lg.tokens...)
		draft = tree.draft(out[len(out)-1], lg.rows, tree.nodes+lg.lastNode*draftLen)
	}
	st.Seconds = time.Since(t1).Seconds()
	st.Tokens = n
	st.TargetCalls += st.Windows
	return out[:n], st, nil
}

// ssdVerified is one verified draft tree: the emitted tokens, the last
// accepted node and every row's logits.
type ssdVerified struct {
	tokens   []int32
	lastNode int
	rows     [][]float32
}

// ssdVerify submits a draft tree and its forecast rows (kv-prefix-offset
// = the draft nodes) and commits the path greedy decoding accepts
// (verify_draft_tree).
func (s *Staged) ssdVerify(t *ssdTree, rows []int32, st *SpecStats) (*ssdVerified, error) {
	v, _, err := s.ssdVariant(len(rows), true)
	if err != nil {
		return nil, err
	}
	lg, err := s.ssdCall(v, rows, t.parent, t.nodes)
	if err != nil {
		return nil, err
	}
	out := &ssdVerified{tokens: []int32{Argmax(lg[0])}, rows: lg}
	sel := make([]bool, len(rows))
	sel[0] = true
	for cur := 1; cur < t.nodes; cur++ {
		if t.parent[cur] == out.lastNode && rows[cur] == out.tokens[len(out.tokens)-1] {
			out.tokens = append(out.tokens, Argmax(lg[cur]))
			out.lastNode = cur
			sel[cur] = true
		}
	}
	if err := s.Commit(sel); err != nil {
		return nil, err
	}
	st.Windows++
	st.Proposed += t.nodes - 1
	st.Accepted += len(out.tokens) - 1
	return out, nil
}

// ssdStep runs rows (a chain when parent is nil) in one call and commits
// the selection.
func (s *Staged) ssdStep(rows []int32, parent []int, noPrefix int, sel []bool) ([][]float32, error) {
	v, _, err := s.ssdVariant(len(rows), true)
	if err != nil {
		return nil, err
	}
	lg, err := s.ssdCall(v, rows, parent, noPrefix)
	if err != nil {
		return nil, err
	}
	return lg, s.Commit(sel)
}

// ssdVariant picks the variant for a call of rows new tokens, all of the
// committed sequence being in the cache.
func (s *Staged) ssdVariant(rows int, one bool) (*stagedVariant, int, error) {
	v, n, err := s.choose(rows, len(s.history)+rows, one)
	if err != nil {
		return nil, 0, err
	}
	if v.arc {
		return nil, 0, fmt.Errorf("runtime: staged: ssd-q1 on AR-c graph AR %d CL %d: the forecast prefix needs KV graphs (%s)", v.ar, v.cl, shard.RuleARcMask)
	}
	return v, n, nil
}

// ssdCall processes rows after the committed sequence on v: parent is
// the attention map (nil: a chain), rows before noPrefix do not see the
// forecast prefix. Positions are depths after the committed tokens.
func (s *Staged) ssdCall(v *stagedVariant, rows []int32, parent []int, noPrefix int) ([][]float32, error) {
	if s.step != nil {
		return nil, fmt.Errorf("runtime: staged: the previous step is not committed")
	}
	if parent == nil {
		parent = make([]int, len(rows))
		for r := range parent {
			parent[r] = r - 1
		}
	}
	s.use(v)
	if !s.ssd.loaded {
		s.loadPrefix(v)
	}
	base := s.nValid
	pos := make([]int32, len(rows))
	for r, p := range parent {
		pos[r] = int32(len(s.history))
		if p >= 0 {
			pos[r] = pos[p] + 1
		}
	}
	s.fill(v, rows, parent, pos, base)
	if b := v.bufs[shard.AttentionMask]; b != nil {
		for r := range min(noPrefix, len(rows)) {
			row := b.f[r*v.cl:]
			for j := range s.ssd.prefix {
				row[j] = MaskedValue
			}
		}
	}
	logits, err := s.call(v, len(rows))
	if err != nil {
		return nil, err
	}
	s.step = &stagedStep{v: v, tokens: rows, parent: parent, base: base, logits: logits, feats: s.callFeatures(len(rows))}
	return logits, nil
}

// checkPrefix checks the forecast-prefix KV's shapes.
func (s *Staged) checkPrefix(o *SSDOptions) error {
	c := &s.e.cfg
	want := c.KVHeads * s.p.Dialog.ForecastPrefix * c.HeadDim
	for _, kv := range []struct {
		name string
		t    [][]float32
	}{{"keys", o.PrefixKeys}, {"values", o.PrefixValues}} {
		if kv.t != nil && len(kv.t) != c.Layers {
			return fmt.Errorf("runtime: staged: ssd-q1 forecast prefix %s for %d layers, model has %d", kv.name, len(kv.t), c.Layers)
		}
		for l, x := range kv.t {
			if x != nil && (len(x) != want || c.LayerKinds[l] != model.Attention) {
				return fmt.Errorf("runtime: staged: ssd-q1 forecast prefix %s of layer %d: %d values, want %d (kv heads × forecast-prefix × head dim) on attention layers only", kv.name, l, len(x), want)
			}
		}
	}
	return nil
}

// loadPrefix restores the forecast prefix into the first cache entries of
// KV variant v, as Genie's restore does at dialog start.
func (s *Staged) loadPrefix(v *stagedVariant) {
	c := &s.e.cfg
	nkv, d, pn := c.KVHeads, c.HeadDim, s.ssd.prefix
	past := v.cl - v.ar
	at := func(t [][]float32, l int) []float32 {
		if t == nil {
			return nil
		}
		return t[l]
	}
	for l, kind := range c.LayerKinds {
		if kind != model.Attention {
			continue
		}
		ki, vi := v.f(s.names[l].keyIn), v.f(s.names[l].valueIn)
		k, val := at(s.ssd.opts.PrefixKeys, l), at(s.ssd.opts.PrefixValues, l)
		for h := 0; h < nkv; h++ {
			for j := 0; j < pn; j++ {
				for i := 0; i < d; i++ {
					var x float32
					if k != nil {
						x = k[(h*pn+j)*d+i]
					}
					ki[(h*d+i)*past+j] = x
				}
				dst := vi[(h*past+j)*d : (h*past+j+1)*d]
				if val != nil {
					copy(dst, val[(h*pn+j)*d:(h*pn+j+1)*d])
				} else {
					clear(dst)
				}
			}
		}
	}
	s.ssd.loaded = true
}

// SSDSpeculator gives SpeculateSSD the signature of the drafter-based
// decodes (Engine.Speculate, Staged.Speculate), for code that measures
// any of them: the dialog drafts for itself, so the drafter and k are not
// used.
type SSDSpeculator struct {
	Staged  *Staged
	Options SSDOptions
}

// Speculate is Staged.SpeculateSSD.
func (x SSDSpeculator) Speculate(ctx context.Context, _ Drafter, prompt []int32, n, _ int) ([]int32, SpecStats, error) {
	return x.Staged.SpeculateSSD(ctx, x.Options, prompt, n)
}
