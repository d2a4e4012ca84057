package runtime

import (
	"fmt"
	"math"
	"slices"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// Staged decodes a model through a shard plan the way Genie runs the
// plan's context binaries: one graph call per stage over exactly the
// graph's I/O tensors, which live in real buffers of the plan's shapes and
// layouts, and a KV manager that copies the accepted rows of every
// past_*_out into past_*_in after a call (qnn-genie.md §1.2–1.3).
//
// Inside a stage the arithmetic is the runtime's own (Embed, RunLayers,
// Head): a call loads each layer's cache from past_key/value_L_in (keys
// transposed), its RoPE positions from position_ids_cos/_sin and its
// attention pattern from attention_mask, and writes the new entries to the
// _out tensors. Masked cache slots are skipped exactly as in whole-model
// decoding, so staged and whole decoding give bit-identical logits.
//
// Gated DeltaNet layers read past_conv/past_ssm_in and write _out after
// all AR rows of a call, padding included, as the exported graphs do; the
// KV manager then takes the state after the last accepted row from the
// runtime's per-token snapshots (Genie itself carries no recurrent state,
// §0.5), so padded calls and rejected draft tokens roll back correctly.
// Accepted rows must then be a prefix of the call's rows (a chain).
//
// A Staged holds one sequence and is used by one goroutine at a time.
// Its Greedy and TeacherForced methods make it a golden.Decoder.
type Staged struct {
	e    *Engine
	p    *shard.Plan
	st   *State // per-layer caches used inside stage calls
	vars []*stagedVariant

	history []int32        // committed tokens: Genie's token_history
	kv      *stagedVariant // KV variant whose _in tensors hold the cache
	nValid  int            // n_valid_kv: entries in kv's past_*_in
	step    *stagedStep    // the processed call awaiting Commit
	names   []layerNames   // per layer, formatted once
	calls   map[[2]int]int // graph calls per (AR, CL)
	x       []float32      // hidden states of the running call
	feat    stagedFeatures // drafter features (staged_features.go)
	ssd     stagedSSD      // ssd-q1 state (staged_ssd.go)
	eaglet  stagedEaglet   // eaglet target state (staged_eaglet.go)
	sim     *Simulation    // quantization of every call's I/O (simulate.go), or nil
}

// layerNames are a layer's state tensor names.
type layerNames struct {
	keyIn, keyOut, valueIn, valueOut, convIn, convOut, ssmIn, ssmOut string
}

// stagedVariant is one (AR, CL) of the plan with its graphs and, while it
// is in use, its tensors (shared by name across its graphs, as Genie links
// same-named I/O into one buffer).
type stagedVariant struct {
	ar, cl int
	arc    bool // CL == AR: Genie's AR-c mode (no past inputs)
	graphs []*shard.Graph
	bufs   map[string]*surface
}

// surface is one I/O tensor's buffer.
type surface struct {
	t shard.Tensor
	f []float32
	i []int32
}

// stagedStep is a processed call: its rows and what Commit needs.
type stagedStep struct {
	v      *stagedVariant
	tokens []int32 // rows (re-processed history, then new tokens)
	parent []int   // row index of each row's parent, −1 for the committed past
	reproc int     // leading rows that re-process committed history
	base   int     // KV entries visible to the call (n_valid_kv; 0 on AR-c)
	logits [][]float32
	feats  [][]float32 // per row, the feature layers' inputs (when asked for)
	hidden [][]float32 // per row, last_hidden_states (eaglet decoding only)
}

// MaskedValue is what Staged writes into attention_mask for a slot a row
// must not see: Genie's value for float masks (qnn-genie.md §1.2). A stage
// reads any value ≤ MaskThreshold as masked and exactly 0 as visible.
const (
	MaskedValue   = -1000
	MaskThreshold = -20 // exp(−20) ≈ 2e−9: nothing a softmax can notice
)

// NewStaged prepares to decode e's model through plan p. The plan must
// describe this model (architecture, layer kinds, widths, vocabulary),
// every graph's tensors must be exactly the surfaces the executor feeds
// and reads, with the shapes the model implies, and every CL must fit the
// engine's context (Options.Context).
func NewStaged(e *Engine, p *shard.Plan) (*Staged, error) {
	if e == nil || p == nil {
		return nil, fmt.Errorf("runtime: staged: nil engine or plan")
	}
	if err := checkPlanModel(e, p); err != nil {
		return nil, err
	}
	s := &Staged{e: e, p: p, st: e.NewState(), calls: map[[2]int]int{}}
	for l := range e.cfg.Layers {
		s.names = append(s.names, layerNames{
			shard.PastKey(l, "in"), shard.PastKey(l, "out"), shard.PastValue(l, "in"), shard.PastValue(l, "out"),
			shard.PastConv(l, "in"), shard.PastConv(l, "out"), shard.PastSSM(l, "in"), shard.PastSSM(l, "out"),
		})
	}
	if len(p.Variants) == 0 {
		return nil, fmt.Errorf("runtime: staged: plan %s has no variants", p.Model.Name)
	}
	for _, pv := range p.Variants {
		v := &stagedVariant{ar: pv.AR, cl: pv.CL, arc: pv.AR == pv.CL}
		if pv.AR < 1 || pv.CL < pv.AR {
			return nil, fmt.Errorf("runtime: staged: plan %s: variant AR %d CL %d: want 1 ≤ AR ≤ CL", p.Model.Name, pv.AR, pv.CL)
		}
		if pv.CL > e.ctxLen {
			return nil, fmt.Errorf("runtime: staged: plan %s: CL %d exceeds the engine's context length %d (raise Options.Context / --ctx)", p.Model.Name, pv.CL, e.ctxLen)
		}
		for k := range p.Stages {
			g := p.Graph(k, pv.AR, pv.CL)
			if g == nil {
				return nil, fmt.Errorf("runtime: staged: plan %s: no graph for stage %d of AR %d CL %d", p.Model.Name, k, pv.AR, pv.CL)
			}
			if err := s.checkGraph(g, v); err != nil {
				return nil, err
			}
			v.graphs = append(v.graphs, g)
		}
		s.vars = append(s.vars, v)
	}
	// Genie prefers the smallest CL, then the smallest AR (§1.3).
	slices.SortStableFunc(s.vars, func(a, b *stagedVariant) int {
		if a.cl != b.cl {
			return a.cl - b.cl
		}
		return a.ar - b.ar
	})
	return s, nil
}

// checkPlanModel refuses a plan made for another model.
func checkPlanModel(e *Engine, p *shard.Plan) error {
	if err := p.Fits(e.cfg); err != nil {
		return fmt.Errorf("runtime: staged: plan %s does not fit model %s: %w", p.Model.Name, e.name, err)
	}
	return nil
}

// expectedIO is what stage k of variant v must take and give: the
// surfaces of DESIGN.md's table for this model.
func (s *Staged) expectedIO(k int, v *stagedVariant) (in, out map[string][]int64) {
	c := &s.e.cfg
	st := &s.p.Stages[k]
	ar, cl := int64(v.ar), int64(v.cl)
	past, h := cl-ar, int64(c.Hidden)
	in, out = map[string][]int64{}, map[string][]int64{}
	switch {
	case st.Embedding && s.p.Dialog.Type == shard.Eaglet:
		in[shard.InputEmbeds] = []int64{1, ar, h}
	case st.Embedding:
		in[shard.InputIDs] = []int64{1, ar}
	default:
		in[shard.HiddenStates(k-1)] = []int64{1, ar, h}
	}
	if d := s.p.Draft; d != nil {
		last := len(s.p.Stages) - 1
		for _, l := range d.Head.Taps() {
			switch ts := s.p.TapStage(l); {
			case ts == k && k != last:
				out[shard.Eagle3Tap(l)] = []int64{1, ar, h}
			case ts != k && k == last:
				in[shard.Eagle3Tap(l)] = []int64{1, ar, h}
			}
		}
	}
	if slices.Contains(c.LayerKinds[st.FirstLayer:st.LastLayer+1], model.Attention) {
		in[shard.AttentionMask] = []int64{1, 1, ar, cl}
		if s.p.Positional == shard.Rope {
			in[shard.PositionIDsCos] = []int64{1, 1, ar, int64(s.p.RopeDim)}
			in[shard.PositionIDsSin] = []int64{1, 1, ar, int64(s.p.RopeDim)}
		} else {
			in[shard.PositionIDs] = []int64{1, 1, ar}
		}
	}
	nkv, d := int64(c.KVHeads), int64(c.HeadDim)
	for l := st.FirstLayer; l <= st.LastLayer; l++ {
		if c.LayerKinds[l] == model.Attention {
			if !v.arc {
				in[s.names[l].keyIn] = []int64{nkv, 1, d, past}
				in[s.names[l].valueIn] = []int64{nkv, 1, past, d}
			}
			out[s.names[l].keyOut] = []int64{nkv, 1, d, ar}
			out[s.names[l].valueOut] = []int64{nkv, 1, ar, d}
			continue
		}
		conv := []int64{int64(c.ConvDim()), int64(c.ConvKernel - 1)}
		ssm := []int64{int64(c.SSMValueHeads), int64(c.SSMKeyDim), int64(c.SSMValueDim)}
		if !v.arc {
			in[s.names[l].convIn], in[s.names[l].ssmIn] = conv, ssm
		}
		out[s.names[l].convOut], out[s.names[l].ssmOut] = conv, ssm
	}
	if st.Head {
		out[shard.Logits] = []int64{1, ar, int64(c.VocabSize)}
	} else {
		out[shard.HiddenStates(k)] = []int64{1, ar, h}
	}
	return in, out
}

// checkGraph makes sure graph g is exactly the surface set the executor
// feeds and reads (an optional eaglet last_hidden_states aside).
func (s *Staged) checkGraph(g *shard.Graph, v *stagedVariant) error {
	in, out := s.expectedIO(g.Stage, v)
	if s.p.Stages[g.Stage].Head {
		if t := g.Output(shard.LastHiddenStates); t != nil || s.p.Dialog.Type == shard.Eaglet {
			w := int64(s.e.cfg.Hidden)
			if d := s.p.Draft; d != nil {
				w = int64(d.Head.Hidden) // the head's fc over the taps
			}
			out[shard.LastHiddenStates] = []int64{1, int64(v.ar), w}
		}
	}
	check := func(kind string, ts []shard.Tensor, want map[string][]int64) error {
		seen := map[string]bool{}
		for _, t := range ts {
			w, ok := want[t.Name]
			if !ok {
				return fmt.Errorf("runtime: staged: plan %s: graph %s: %s %q is not a surface of this stage (model %s)", s.p.Model.Name, g.Name, kind, t.Name, s.e.name)
			}
			if !slices.Equal(t.Shape, w) {
				return fmt.Errorf("runtime: staged: plan %s: graph %s: %s %q has shape %v, model %s needs %v", s.p.Model.Name, g.Name, kind, t.Name, t.Shape, s.e.name, w)
			}
			wantType := shard.Float32
			if t.Name == shard.InputIDs || t.Name == shard.PositionIDs {
				wantType = shard.Int32
			}
			if t.DType != wantType {
				return fmt.Errorf("runtime: staged: plan %s: graph %s: %s %q has dtype %s, want %s", s.p.Model.Name, g.Name, kind, t.Name, t.DType, wantType)
			}
			seen[t.Name] = true
		}
		for _, name := range sortedKeys(want) {
			if !seen[name] {
				return fmt.Errorf("runtime: staged: plan %s: graph %s lacks %s %q %v", s.p.Model.Name, g.Name, kind, name, want[name])
			}
		}
		return nil
	}
	if err := check("input", g.Inputs, in); err != nil {
		return err
	}
	return check("output", g.Outputs, out)
}

func sortedKeys(m map[string][]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// buffers allocates v's tensors (once; they stay while v is in use).
func (s *Staged) buffers(v *stagedVariant) {
	if v.bufs != nil {
		return
	}
	v.bufs = map[string]*surface{}
	for _, g := range v.graphs {
		for _, ts := range [][]shard.Tensor{g.Inputs, g.Outputs} {
			for _, t := range ts {
				if v.bufs[t.Name] != nil {
					continue // linked by name (checkGraph fixed its shape)
				}
				n := 1
				for _, d := range t.Shape {
					n *= int(d)
				}
				b := &surface{t: t}
				if t.DType == shard.Int32 {
					b.i = make([]int32, n)
				} else {
					b.f = make([]float32, n)
				}
				v.bufs[t.Name] = b
			}
		}
	}
}

// release drops v's tensors.
func (v *stagedVariant) release() { v.bufs = nil }

func (v *stagedVariant) f(name string) []float32 { return v.bufs[name].f }

// fill writes the shared inputs of a call with rows tokens (parents and
// positions per row) after base visible cache entries: input_ids padded
// with token 0, the additive attention_mask and the positional tables.
// Padding rows see only their own slot.
func (s *Staged) fill(v *stagedVariant, tokens []int32, parent []int, pos []int32, base int) {
	ar, cl := v.ar, v.cl
	past := cl - ar
	if b := v.bufs[shard.InputIDs]; b != nil {
		clear(b.i)
		copy(b.i, tokens)
	}
	if b := v.bufs[shard.InputEmbeds]; b != nil {
		// Genie's embedding LUT: one row per token, padding rows token 0's.
		ids := make([]int32, ar)
		copy(ids, tokens)
		s.eaglet.embedErr = s.embed(ids, b.f)
	}
	if b := v.bufs[shard.AttentionMask]; b != nil {
		m := b.f
		for i := range m {
			m[i] = MaskedValue
		}
		for r := 0; r < ar; r++ {
			row := m[r*cl : (r+1)*cl]
			row[past+r] = 0
			if r >= len(tokens) {
				continue
			}
			for j := 0; j < base; j++ {
				row[j] = 0
			}
			for a := parent[r]; a >= 0; a = parent[a] {
				row[past+a] = 0
			}
		}
	}
	padPos := func(r int) int32 {
		if r < len(pos) {
			return pos[r]
		}
		return int32(base + r)
	}
	if b := v.bufs[shard.PositionIDs]; b != nil {
		for r := range b.i {
			b.i[r] = padPos(r)
		}
	}
	if bc := v.bufs[shard.PositionIDsCos]; bc != nil {
		bs := v.bufs[shard.PositionIDsSin]
		half := s.p.RopeDim
		for r := 0; r < ar; r++ {
			s.e.ropeTable(padPos(r), bc.f[r*half:(r+1)*half], bs.f[r*half:(r+1)*half])
		}
	}
}

// readMask turns stage input attention_mask into RunLayers' boolean mask
// (same [AR][CL] layout) and marks the cache columns any row can see.
func readMask(g *shard.Graph, m []float32, ar, cl int, used []bool) ([]bool, error) {
	out := make([]bool, ar*cl)
	for i, v := range m {
		switch {
		case v == 0:
			out[i] = true
			used[i%cl] = true
		case v <= MaskThreshold:
		default:
			return nil, fmt.Errorf("runtime: staged: graph %s: %s[%d][%d] = %g: the CPU executor takes 0 (visible) or ≤ %d (masked)", g.Name, shard.AttentionMask, i/cl, i%cl, v, MaskThreshold)
		}
	}
	return out, nil
}

// readPositions recovers each row's RoPE position from the cos/sin tables
// and requires the row to be exactly the runtime's table for it, so that
// the layers rotate by what the stage was given. The lowest-frequency
// pair estimates the position (unambiguous while its angle stays below
// π), its neighbours absorb rounding; failing that, every position of the
// context is tried.
func (s *Staged) readPositions(g *shard.Graph, cos, sin []float32, ar int) ([]int32, error) {
	e := s.e
	half := s.p.RopeDim
	// Angle per position of the last pair, as ropeTable builds it.
	f := e.rope.Rate(half - 1)
	pos := make([]int32, ar)
	c, sn := make([]float32, half), make([]float32, half)
	for r := 0; r < ar; r++ {
		rc, rs := cos[r*half:(r+1)*half], sin[r*half:(r+1)*half]
		est := math.Atan2(float64(rs[half-1]), float64(rc[half-1])) / f
		if est < -0.5 {
			est += 2 * math.Pi / f
		}
		p0 := int64(math.Round(est))
		found := false
		try := func(p int64) bool {
			if p < 0 || p >= int64(e.ctxLen) {
				return false
			}
			e.ropeTable(int32(p), c, sn)
			if s.st.ropeQ != nil { // simulating: the tables are quantized
				s.st.ropeQ(c, sn)
			}
			if slices.Equal(c, rc) && slices.Equal(sn, rs) {
				pos[r], found = int32(p), true
			}
			return found
		}
		for _, d := range []int64{0, -1, 1, -2, 2} {
			if try(p0 + d) {
				break
			}
		}
		// Too few or too fast pairs for the estimate: scan the context.
		for p := int64(0); !found && p < int64(e.ctxLen); p++ {
			try(p)
		}
		if !found {
			return nil, fmt.Errorf("runtime: staged: graph %s: row %d of %s/%s is not the RoPE table of a position below %d", g.Name, r, shard.PositionIDsCos, shard.PositionIDsSin, e.ctxLen)
		}
	}
	return pos, nil
}

// runGraph executes stage k of variant v: it reads the stage's input
// tensors and writes its output tensors. DeltaNet snapshots are numbered
// by rows of this call. runStage (simulate.go) wraps it.
func (s *Staged) runGraph(v *stagedVariant, k int) error {
	c := &s.e.cfg
	g := v.graphs[k]
	stg := &s.p.Stages[k]
	ar, cl := v.ar, v.cl
	past := cl - ar
	h := c.Hidden
	x := grow(&s.x, ar*h)
	if b := v.bufs[shard.InputEmbeds]; stg.Embedding && b != nil {
		if err := s.eaglet.embedErr; err != nil {
			return fmt.Errorf("runtime: staged: graph %s: %s: %w", g.Name, shard.InputEmbeds, err)
		}
		copy(x, b.f)
	} else if stg.Embedding {
		if err := s.embed(v.bufs[shard.InputIDs].i, x); err != nil {
			return fmt.Errorf("runtime: staged: graph %s: %w", g.Name, err)
		}
	} else {
		copy(x, v.f(shard.HiddenStates(k-1)))
	}
	var mask []bool
	var pos []int32
	used := make([]bool, cl)
	if b := v.bufs[shard.AttentionMask]; b != nil && g.Input(shard.AttentionMask) != nil {
		var err error
		if mask, err = readMask(g, b.f, ar, cl, used); err != nil {
			return err
		}
		if s.p.Positional == shard.Rope {
			pos, err = s.readPositions(g, v.f(shard.PositionIDsCos), v.f(shard.PositionIDsSin), ar)
		} else {
			pos = slices.Clone(v.bufs[shard.PositionIDs].i)
		}
		if err != nil {
			return err
		}
	}
	nkv, d := c.KVHeads, c.HeadDim
	for l := stg.FirstLayer; l <= stg.LastLayer; l++ {
		s.captureFeatures(v, k, l, x)
		s.captureTap(v, k, l, x)
		ls := &s.st.layers[l]
		if ls.kind == model.Attention {
			// The cache slots the mask makes visible come from _in;
			// the others are never read.
			ls.growKV(cl, d)
			ls.cutKV(past, d)
			if !v.arc {
				ki, vi := v.f(s.names[l].keyIn), v.f(s.names[l].valueIn)
				for j := 0; j < past; j++ {
					if !used[j] {
						continue
					}
					for hh := 0; hh < nkv; hh++ {
						for i := 0; i < d; i++ {
							ls.k[hh][j*d+i] = ki[(hh*d+i)*past+j]
						}
						copy(ls.v[hh][j*d:(j+1)*d], vi[(hh*past+j)*d:(hh*past+j+1)*d])
					}
				}
			}
			ls.n = past
			if err := s.st.RunLayers(l, l+1, x, pos, mask); err != nil {
				return fmt.Errorf("runtime: staged: graph %s: layer %d: %w", g.Name, l, err)
			}
			ko, vo := v.f(s.names[l].keyOut), v.f(s.names[l].valueOut)
			for r := 0; r < ar; r++ {
				src := (past + r) * d
				for hh := 0; hh < nkv; hh++ {
					for i := 0; i < d; i++ {
						ko[(hh*d+i)*ar+r] = ls.k[hh][src+i]
					}
					copy(vo[(hh*ar+r)*d:(hh*ar+r+1)*d], ls.v[hh][src:src+d])
				}
			}
			continue
		}
		// DeltaNet: state from _in (zero on AR-c graphs), snapshots
		// numbered from 0 within this call.
		if v.arc {
			clear(ls.conv)
			clear(ls.ssm)
		} else {
			convFromPlan(ls.conv, v.f(s.names[l].convIn), c)
			copy(ls.ssm, v.f(s.names[l].ssmIn))
		}
		ls.n = 0
		ls.dropSnaps(0)
		if err := s.st.RunLayers(l, l+1, x, nil, nil); err != nil {
			return fmt.Errorf("runtime: staged: graph %s: layer %d: %w", g.Name, l, err)
		}
		convToPlan(v.f(s.names[l].convOut), ls.conv, c)
		copy(v.f(s.names[l].ssmOut), ls.ssm)
	}
	if !stg.Head {
		copy(v.f(shard.HiddenStates(k)), x)
		return nil
	}
	s.captureTap(v, k, c.Layers, x)
	if b := v.bufs[shard.LastHiddenStates]; b != nil {
		if err := s.lastHiddenStates(v, b.f, x); err != nil {
			return fmt.Errorf("runtime: staged: graph %s: %w", g.Name, err)
		}
	}
	s.captureFeatures(v, k, c.Layers, x)
	if err := s.st.Head(x, v.f(shard.Logits)); err != nil {
		return fmt.Errorf("runtime: staged: graph %s: %w", g.Name, err)
	}
	return nil
}

// convFromPlan converts a past_conv surface [conv_dim][K−1] into the
// runtime's [K−1][conv_dim]; convToPlan the other way.
func convFromPlan(dst, src []float32, c *model.Config) {
	taps, cd := c.ConvKernel-1, c.ConvDim()
	for j := 0; j < taps; j++ {
		for ch := 0; ch < cd; ch++ {
			dst[j*cd+ch] = src[ch*taps+j]
		}
	}
}

func convToPlan(dst, src []float32, c *model.Config) {
	taps, cd := c.ConvKernel-1, c.ConvDim()
	for j := 0; j < taps; j++ {
		for ch := 0; ch < cd; ch++ {
			dst[ch*taps+j] = src[j*cd+ch]
		}
	}
}
