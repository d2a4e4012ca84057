package sparse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

// Options say which weights a variant zeroes.
type Options struct {
	Pattern Pattern
	// Sparsity is the target fraction. For N:M it may be 0 (meaning
	// 1 − N/M, or only the Targets when there are any) and must otherwise
	// equal 1 − N/M. Structural patterns need it.
	Sparsity float64
	// Targets set per-tensor sparsities for N:M and block patterns (first
	// match wins; 0 excludes). Tensors no target matches get Sparsity if
	// they are in the default set (see the package doc).
	Targets []Target
	Method  Method
	// Align, for channel and neuron patterns, removes more structures when
	// needed so that the pruned width (hidden or ffn) is a multiple of
	// Align (at least Align): 32 keeps Q8_0 rows, 128 keeps Q1_0 rows. The
	// achieved sparsity is then at least the target.
	Align int
	// Activations are required for Wanda.
	Activations Activations
}

// Removed lists the structures a structural pattern zeroed.
type Removed struct {
	Channels []int   `json:"channels,omitempty"`
	Heads    [][]int `json:"heads,omitempty"`   // per layer; nil for DeltaNet layers
	Neurons  [][]int `json:"neurons,omitempty"` // per layer
	Layers   []int   `json:"layers,omitempty"`
}

// TensorReport is one tensor with structured zeros.
type TensorReport struct {
	Name     string  `json:"name"`
	Dims     []int64 `json:"dims"`
	Target   float64 `json:"target"`
	Zeroed   int64   `json:"zeroed"`
	Elements int64   `json:"elements"`
	Sparsity float64 `json:"sparsity"`
	// Effective is the fraction of exact zeros in the written artifact
	// (after quantization), set by MeasureEffective.
	Effective *float64 `json:"effective_sparsity,omitempty"`
	Note      string   `json:"note,omitempty"`
}

// Report says what a variant zeroed.
type Report struct {
	Pattern string   `json:"pattern"`
	Method  string   `json:"selection"`
	Target  float64  `json:"target_sparsity"`
	Removed *Removed `json:"removed,omitempty"`
	// StructureSparsity is the fraction of channels, heads (per group),
	// neurons or layers removed.
	StructureSparsity float64        `json:"structure_sparsity,omitempty"`
	Tensors           []TensorReport `json:"tensors"`
	// Zeroed / Elements over the tensors listed.
	Zeroed   int64   `json:"zeroed"`
	Elements int64   `json:"elements"`
	Sparsity float64 `json:"sparsity"`
	// ModelSparsity is Zeroed over every weight of the model.
	ModelWeights  int64    `json:"model_weights"`
	ModelSparsity float64  `json:"model_sparsity"`
	Notes         []string `json:"notes,omitempty"`
}

// Variant is a structured-zero dense variant of a model.
type Variant struct {
	// Model has the source's config, tensor names and shapes; tensors with
	// structured zeros are computed on demand from the source (which must
	// stay open) and stored in their source type when that is F32, F16 or
	// BF16, else in F32.
	Model  *model.Model
	Report *Report

	src     *model.Model
	pattern Pattern
	edits   map[string]*edit
	removed Removed
}

// edit is what Apply does to one tensor.
type edit struct {
	rows, cols []int // structural: rows and columns to zero
	all        bool
	nm         bool
	n, m       int
	block      int
	s          float64
	act        []float64
}

func (e *edit) apply(w []float32, cols int) int64 {
	switch {
	case e.all:
		clear(w)
		return int64(len(w))
	case e.nm:
		return zeroNM(w, cols, e.n, e.m, e.act)
	case e.block > 0:
		return zeroBlocks(w, len(w)/cols, cols, e.block, e.s, e.act)
	}
	zeroRowsCols(w, cols, e.rows, e.cols)
	rows := int64(len(w) / cols)
	nr, nc := int64(len(e.rows)), int64(len(e.cols))
	return nr*int64(cols) + nc*(rows-nr)
}

// Apply makes the structured-zero variant of m. It reads the tensors it
// scores once; the variant's zeroed tensors are computed when read.
func Apply(m *model.Model, opt Options) (*Variant, error) {
	if m == nil {
		return nil, errors.New("sparse: nil model")
	}
	p := opt.Pattern
	if !validSparsity(opt.Sparsity) {
		return nil, fmt.Errorf("sparse: sparsity %v, want [0, 1)", opt.Sparsity)
	}
	if p.Structural() && len(opt.Targets) > 0 {
		return nil, fmt.Errorf("sparse: pattern %s takes one model-wide --sparsity, not per-tensor targets", p)
	}
	if p.Kind == NM && opt.Sparsity != 0 && !sameSparsity(opt.Sparsity, p) {
		return nil, fmt.Errorf("sparse: pattern %s has sparsity exactly %g, not %g", p, nmSparsity(p), opt.Sparsity)
	}
	if p.Kind != NM && opt.Sparsity == 0 && len(opt.Targets) == 0 {
		return nil, fmt.Errorf("sparse: pattern %s needs a sparsity", p)
	}
	if opt.Align < 0 || opt.Align > 1 && p.Kind != Channel && p.Kind != Neuron {
		return nil, fmt.Errorf("sparse: alignment %d applies to channel and neuron patterns only", opt.Align)
	}
	if opt.Method == Wanda && len(opt.Activations) == 0 {
		return nil, errors.New("sparse: wanda selection needs activations (calibration prompts)")
	}
	v := &Variant{src: m, pattern: p, edits: map[string]*edit{}}
	rep := &Report{Pattern: p.String(), Method: opt.Method.String(), Target: opt.Sparsity}
	if p.Kind == NM && opt.Sparsity == 0 && len(opt.Targets) == 0 {
		rep.Target = nmSparsity(p)
	}
	v.Report = rep
	var err error
	switch p.Kind {
	case NM, Block:
		err = v.planMatrices(opt)
	case Channel:
		err = v.planChannels(opt)
	case Head:
		err = v.planHeads(opt)
	case Neuron:
		err = v.planNeurons(opt)
	case Layer:
		err = v.planLayers(opt)
	default:
		err = fmt.Errorf("unknown pattern kind %d", p.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("sparse: %w", err)
	}
	if err := v.build(opt); err != nil {
		return nil, fmt.Errorf("sparse: %w", err)
	}
	return v, nil
}

func nmSparsity(p Pattern) float64 { return 1 - float64(p.N)/float64(p.M) }

func sameSparsity(s float64, p Pattern) bool { return math.Abs(s-nmSparsity(p)) < 1e-9 }

// defaultMatrix reports whether N:M and block patterns apply to a tensor
// without a target naming it.
func defaultMatrix(t *model.Tensor) bool {
	if !isMatrix(t) || !strings.HasPrefix(t.Name, "blk.") {
		return false
	}
	_, base, _ := blockName(t.Name)
	switch base {
	case "ssm_conv1d.weight", "ssm_alpha.weight", "ssm_beta.weight":
		return false
	}
	return true
}

func isMatrix(t *model.Tensor) bool { return len(t.Dims) >= 2 && t.Rows() > 1 }

// blockName splits "blk.3.attn_q.weight" into 3 and "attn_q.weight".
func blockName(name string) (int, string, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, "", false
	}
	num, base, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, "", false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 {
		return 0, "", false
	}
	return i, base, true
}

// activations returns the tensor's column norms for Wanda, nil for
// magnitude. need says whether a missing entry is an error (matrices the
// runtime multiplies) or means magnitude (lookups, norms, biases).
func activations(opt Options, t *model.Tensor, need bool) ([]float64, error) {
	if opt.Method != Wanda {
		return nil, nil
	}
	a, ok := opt.Activations[t.Name]
	if !ok {
		if need {
			return nil, fmt.Errorf("tensor %s: no activations recorded (calibrated tensors: %s)", t.Name, strings.Join(first(opt.Activations.Tensors(), 8), ", "))
		}
		return nil, nil
	}
	if int64(len(a)) != t.Dims[0] {
		return nil, fmt.Errorf("tensor %s: activations for %d columns, want %d", t.Name, len(a), t.Dims[0])
	}
	return a, nil
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}

// needsActivations reports whether the runtime multiplies by t (so Wanda
// must have its input norms): every matrix but the embedding lookup and
// the conv kernel.
func needsActivations(m *model.Model, t *model.Tensor) bool {
	if !isMatrix(t) {
		return false
	}
	if t.Name == "token_embd.weight" {
		return m.Config.TiedEmbeddings
	}
	return !strings.HasSuffix(t.Name, "ssm_conv1d.weight")
}

func (v *Variant) planMatrices(opt Options) error {
	p := v.pattern
	used := make([]bool, len(opt.Targets))
	for _, t := range v.src.Tensors {
		s, explicit := opt.Sparsity, false
		if p.Kind == NM && s == 0 && len(opt.Targets) == 0 {
			s = nmSparsity(p)
		}
		for i, tg := range opt.Targets {
			if ok, _ := path.Match(tg.Pattern, t.Name); ok && isMatrix(t) {
				used[i] = true
				s, explicit = tg.Sparsity, true
				break
			}
		}
		if s == 0 || (!explicit && !defaultMatrix(t)) {
			continue
		}
		cols := t.Dims[0]
		if p.Kind == NM {
			if !sameSparsity(s, p) {
				return fmt.Errorf("tensor %s: target sparsity %g, but %s has exactly %g", t.Name, s, p, nmSparsity(p))
			}
			if cols%int64(p.M) != 0 {
				if explicit {
					return fmt.Errorf("tensor %s: rows of %d are not a multiple of M = %d", t.Name, cols, p.M)
				}
				v.Report.Notes = append(v.Report.Notes, fmt.Sprintf("%s left dense: rows of %d are not a multiple of %d", t.Name, cols, p.M))
				continue
			}
		}
		act, err := activations(opt, t, needsActivations(v.src, t))
		if err != nil {
			return err
		}
		e := &edit{s: s, act: act}
		if p.Kind == NM {
			e.nm, e.n, e.m = true, p.N, p.M
		} else {
			e.block = p.B
		}
		v.edits[t.Name] = e
	}
	for i, tg := range opt.Targets {
		if !used[i] {
			return fmt.Errorf("target %s=%g matches no matrix", tg.Pattern, tg.Sparsity)
		}
	}
	return nil
}

// Roles of tensors around the residual stream.
var (
	readerNames = []string{"attn_q.weight", "attn_k.weight", "attn_v.weight", "ffn_gate.weight", "ffn_up.weight",
		"attn_qkv.weight", "attn_gate.weight", "ssm_beta.weight", "ssm_alpha.weight"}
	writerNames     = []string{"attn_output.weight", "ffn_down.weight", "ssm_out.weight"}
	hiddenNormNames = []string{"attn_norm.weight", "ffn_norm.weight", "post_attention_norm.weight"}
)

type role uint8

const (
	roleNone   role = iota
	roleReader      // input columns are hidden channels
	roleWriter      // rows are hidden channels
	roleNorm        // elements are hidden channels
)

func hiddenRole(name string) role {
	switch name {
	case "token_embd.weight", "output.weight":
		return roleReader
	case "output_norm.weight":
		return roleNorm
	}
	_, base, ok := blockName(name)
	if !ok {
		return roleNone
	}
	switch {
	case slices.Contains(readerNames, base):
		return roleReader
	case slices.Contains(writerNames, base):
		return roleWriter
	case slices.Contains(hiddenNormNames, base):
		return roleNorm
	}
	return roleNone
}

// scores reads t and returns its row and column scores.
func (v *Variant) scores(opt Options, t *model.Tensor) (rowS, colS []float64, err error) {
	act, err := activations(opt, t, needsActivations(v.src, t))
	if err != nil {
		return nil, nil, err
	}
	w, err := t.Float32()
	if err != nil {
		return nil, nil, err
	}
	rowS, colS = rowColScores(w, int(t.Dims[0]), act)
	return rowS, colS, nil
}

func count(s float64, n int) int {
	return min(max(int(math.Round(s*float64(n))), 0), n-1)
}

// alignedCount is count with the kept width n − k rounded down to a
// multiple of align, but not below align (0 or 1: no rounding).
func alignedCount(s float64, n, align int, what string) (int, error) {
	k := count(s, n)
	if align <= 1 {
		return k, nil
	}
	if n < align {
		return 0, fmt.Errorf("cannot align %d %s to multiples of %d", n, what, align)
	}
	kept := max((n-k)/align*align, align)
	return n - kept, nil
}

// settle checks the k of n structures a sparsity s removes: zero is an
// error (the variant would equal the source), and a count that is not
// s·n exactly gets a note saying what it rounded to and why.
func (v *Variant) settle(s float64, k, n int, what, why string) error {
	if k == 0 {
		return fmt.Errorf("sparsity %g of %d %s rounds to 0: nothing would be removed (the smallest step is 1/%d = %.4g)", s, n, what, n, 1/float64(n))
	}
	if got := float64(k) / float64(n); math.Abs(got-s) > 1e-9 {
		v.Report.Notes = append(v.Report.Notes, fmt.Sprintf("sparsity %g of %d %s is %.4g; removed %d (%.4f): %s",
			s, n, what, s*float64(n), k, got, why))
	}
	return nil
}

// wholeWhy explains the rounding of a channel or neuron count.
func wholeWhy(align int, what, width string) string {
	if align > 1 {
		return fmt.Sprintf("whole %s only, and the kept %s rounded down to a multiple of --align %d", what, width, align)
	}
	return fmt.Sprintf("whole %s only, and at least one is kept", what)
}

func (v *Variant) planChannels(opt Options) error {
	h := v.src.Config.Hidden
	score := make([]float64, h)
	var touched []*model.Tensor
	for _, t := range v.src.Tensors {
		r := hiddenRole(t.Name)
		if r == roleNone {
			continue
		}
		rowS, colS, err := v.scores(opt, t)
		if err != nil {
			return err
		}
		var add []float64
		switch r {
		case roleReader:
			add = colS
		case roleWriter:
			add = rowS
		case roleNorm:
			add = colS // a 1-D tensor is one row of h
		}
		if len(add) != h {
			return fmt.Errorf("tensor %s: %d hidden channels, want %d", t.Name, len(add), h)
		}
		for c, x := range add {
			score[c] += x
		}
		touched = append(touched, t)
	}
	k, err := alignedCount(opt.Sparsity, h, opt.Align, "hidden channels")
	if err != nil {
		return err
	}
	if err := v.settle(opt.Sparsity, k, h, "hidden channels", wholeWhy(opt.Align, "channels", "hidden width")); err != nil {
		return err
	}
	chans := lowest(score, k)
	v.removed.Channels = chans
	v.Report.StructureSparsity = float64(len(chans)) / float64(h)
	if len(chans) == 0 {
		return nil
	}
	for _, t := range touched {
		if hiddenRole(t.Name) == roleWriter {
			v.edits[t.Name] = &edit{rows: chans}
		} else {
			v.edits[t.Name] = &edit{cols: chans}
		}
	}
	return nil
}

// qRowsPerHead is the number of attn_q rows per query head: [q | gate]
// with the output gate.
func qRowsPerHead(c *model.Config) int {
	if c.AttnOutputGate {
		return 2 * c.HeadDim
	}
	return c.HeadDim
}

func (v *Variant) planHeads(opt Options) error {
	c := &v.src.Config
	nh, nkv, d := c.Heads, c.KVHeads, c.HeadDim
	g := nh / nkv
	r := count(opt.Sparsity, g)
	why := fmt.Sprintf("the same number of query heads goes from each of the %d KV groups, so the model keeps grouped-query attention (and --prune can take them out)", nkv)
	if err := v.settle(opt.Sparsity, r, g, "query heads per KV group", why); err != nil {
		return err
	}
	v.Report.StructureSparsity = float64(r) / float64(g)
	v.removed.Heads = make([][]int, c.Layers)
	rph := qRowsPerHead(c)
	for i, kind := range c.LayerKinds {
		if kind != model.Attention {
			continue
		}
		v.removed.Heads[i] = []int{}
		if r == 0 {
			continue
		}
		score := make([]float64, nh)
		q := v.src.Tensor(blk(i, "attn_q.weight"))
		o := v.src.Tensor(blk(i, "attn_output.weight"))
		qb := v.src.Tensor(blk(i, "attn_q.bias"))
		rowS, _, err := v.scores(opt, q)
		if err != nil {
			return err
		}
		for row, x := range rowS {
			score[row/rph] += x
		}
		if qb != nil {
			_, colS, err := v.scores(opt, qb)
			if err != nil {
				return err
			}
			for j, x := range colS {
				score[j/rph] += x
			}
		}
		_, colS, err := v.scores(opt, o)
		if err != nil {
			return err
		}
		for j, x := range colS {
			score[j/d] += x
		}
		var heads []int
		for kv := 0; kv < nkv; kv++ {
			for _, h := range lowest(score[kv*g:(kv+1)*g], r) {
				heads = append(heads, kv*g+h)
			}
		}
		v.removed.Heads[i] = heads
		qRows, oCols := headRows(heads, rph, d)
		v.edits[q.Name] = &edit{rows: qRows}
		if qb != nil {
			v.edits[qb.Name] = &edit{cols: qRows}
		}
		v.edits[o.Name] = &edit{cols: oCols}
	}
	return nil
}

func (v *Variant) planNeurons(opt Options) error {
	c := &v.src.Config
	k, err := alignedCount(opt.Sparsity, c.FFN, opt.Align, "ffn units")
	if err != nil {
		return err
	}
	if err := v.settle(opt.Sparsity, k, c.FFN, "ffn units", wholeWhy(opt.Align, "units", "ffn width")); err != nil {
		return err
	}
	v.Report.StructureSparsity = float64(k) / float64(c.FFN)
	v.removed.Neurons = make([][]int, c.Layers)
	for i := 0; i < c.Layers; i++ {
		v.removed.Neurons[i] = []int{}
		if k == 0 {
			continue
		}
		score := make([]float64, c.FFN)
		gate, up, down := v.src.Tensor(blk(i, "ffn_gate.weight")), v.src.Tensor(blk(i, "ffn_up.weight")), v.src.Tensor(blk(i, "ffn_down.weight"))
		for _, t := range []*model.Tensor{gate, up} {
			rowS, _, err := v.scores(opt, t)
			if err != nil {
				return err
			}
			for n, x := range rowS {
				score[n] += x
			}
		}
		_, colS, err := v.scores(opt, down)
		if err != nil {
			return err
		}
		for n, x := range colS {
			score[n] += x
		}
		ns := lowest(score, k)
		v.removed.Neurons[i] = ns
		v.edits[gate.Name] = &edit{rows: ns}
		v.edits[up.Name] = &edit{rows: ns}
		v.edits[down.Name] = &edit{cols: ns}
	}
	return nil
}

func (v *Variant) planLayers(opt Options) error {
	c := &v.src.Config
	k := count(opt.Sparsity, c.Layers)
	if err := v.settle(opt.Sparsity, k, c.Layers, "layers", "only whole layers are removed, and at least one is kept"); err != nil {
		return err
	}
	v.Report.StructureSparsity = float64(k) / float64(c.Layers)
	score := make([]float64, c.Layers)
	if k > 0 {
		for _, t := range v.src.Tensors {
			i, _, ok := blockName(t.Name)
			if !ok || i >= c.Layers {
				continue
			}
			rowS, _, err := v.scores(opt, t)
			if err != nil {
				return err
			}
			for _, x := range rowS {
				score[i] += x
			}
		}
	}
	v.removed.Layers = lowest(score, k)
	for _, t := range v.src.Tensors {
		if i, _, ok := blockName(t.Name); ok && slices.Contains(v.removed.Layers, i) {
			v.edits[t.Name] = &edit{all: true}
		}
	}
	return nil
}

func blk(i int, s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }

// build makes the variant model and counts its zeros. Block tiles depend
// on the data, so those tensors are zeroed once here to count them.
func (v *Variant) build(opt Options) error {
	rep := v.Report
	if v.pattern.Structural() {
		rem := v.removed
		rep.Removed = &rem
	}
	tensors := make([]*model.Tensor, 0, len(v.src.Tensors))
	for _, t := range v.src.Tensors {
		if t.Elements() > 0 && isWeight(t) {
			rep.ModelWeights += t.Elements()
		}
		e := v.edits[t.Name]
		if e == nil {
			tensors = append(tensors, t)
			continue
		}
		cols := int(t.Dims[0])
		var zeroed int64
		switch {
		case e.block > 0:
			w, err := t.Float32()
			if err != nil {
				return err
			}
			zeroed = e.apply(w, cols)
		case e.nm:
			zeroed = t.Elements() / int64(e.m) * int64(e.m-e.n)
		default:
			rows := t.Elements() / int64(cols)
			nr, nc := int64(len(e.rows)), int64(len(e.cols))
			zeroed = nr*int64(cols) + nc*(rows-nr)
			if e.all {
				zeroed = t.Elements()
			}
		}
		target := e.s
		if v.pattern.Structural() {
			target = opt.Sparsity
		}
		rep.Tensors = append(rep.Tensors, TensorReport{
			Name: t.Name, Dims: t.Dims, Target: target, Zeroed: zeroed, Elements: t.Elements(),
			Sparsity: float64(zeroed) / float64(t.Elements()),
		})
		rep.Zeroed += zeroed
		rep.Elements += t.Elements()
		tensors = append(tensors, v.zeroed(t, e))
	}
	if rep.Elements > 0 {
		rep.Sparsity = float64(rep.Zeroed) / float64(rep.Elements)
	}
	if rep.ModelWeights > 0 {
		rep.ModelSparsity = float64(rep.Zeroed) / float64(rep.ModelWeights)
	}
	m, err := model.New(v.src.Config, tensors)
	if err != nil {
		return err
	}
	m.Path = v.src.Path
	// The variant records what it was made from, so a golden recorded
	// from the source is accepted for it (and for its qmodels).
	if m.Metadata, err = quantize.Derive(v.src, v.step()); err != nil {
		return err
	}
	v.Model = m
	return nil
}

// step names the variant in its lineage (quantize.KeyLineageSteps).
func (v *Variant) step() string {
	r := v.Report
	return fmt.Sprintf("sparsify %s, %s selection, target %.4g", r.Pattern, r.Method, r.Target)
}

// isWeight excludes the rope frequency table, which is not a weight.
func isWeight(t *model.Tensor) bool { return t.Name != "rope_freqs.weight" }

// outType is the type a rewritten tensor is stored in.
func outType(t gguf.Type) gguf.Type {
	switch t {
	case gguf.F32, gguf.F16, gguf.BF16:
		return t
	}
	return gguf.F32
}

func (v *Variant) zeroed(t *model.Tensor, e *edit) *model.Tensor {
	typ := outType(t.Type)
	return model.LazyTensor(t.Name, t.Dims, typ, func() ([]byte, error) {
		w, err := t.Float32()
		if err != nil {
			return nil, err
		}
		e.apply(w, int(t.Dims[0]))
		return encode(typ, w), nil
	})
}

// encode stores w in typ (F32, F16 or BF16).
func encode(typ gguf.Type, w []float32) []byte {
	le := binary.LittleEndian
	switch typ {
	case gguf.F16:
		b := make([]byte, 2*len(w))
		for i, x := range w {
			le.PutUint16(b[2*i:], half.F32ToF16(x))
		}
		return b
	case gguf.BF16:
		b := make([]byte, 2*len(w))
		for i, x := range w {
			le.PutUint16(b[2*i:], half.F32ToBF16(x))
		}
		return b
	}
	b := make([]byte, 4*len(w))
	for i, x := range w {
		le.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// Removed returns the structures the variant zeroed.
func (v *Variant) Removed() Removed { return v.removed }

// headRows lists the attn_q rows (rph per head) and attn_output columns
// (d per head) of the given heads, in order.
func headRows(heads []int, rph, d int) (qRows, oCols []int) {
	for _, h := range heads {
		for j := 0; j < rph; j++ {
			qRows = append(qRows, h*rph+j)
		}
		for j := 0; j < d; j++ {
			oCols = append(oCols, h*d+j)
		}
	}
	return qRows, oCols
}
