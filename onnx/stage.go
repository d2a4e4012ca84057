package onnx

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// Options control how a stage is built.
type Options struct {
	// Opset decides the form of opset-dependent ops (ReduceMean's axes are
	// an attribute up to 17 and an input from 18). 0 means 17.
	Opset int64
	// Container is the width Q1_0/Q2_0 codes are declared in; 0 means the
	// plan's (shard.Plan.Container, which its stage sizes assume), and any
	// other container is refused.
	Container Container
	// Ranges are calibrated activation ranges by the plan's encoding group
	// (shard.Tensor.Encoding). Groups without a range get no activation
	// encoding, except attention_mask ([−50, 0], Genie writes its max code
	// for "attend") and position_ids_cos (16-bit symmetric over [−m, m],
	// m the RoPE magnitude: 1, or YaRN's attention factor).
	Ranges map[string]Range
	// Forecast holds the ssd-q1 forecast-token embeddings, the plan's
	// forecast-token-count rows of hidden values. The first stage's
	// Gather table is token_embd.weight followed by these rows (token
	// vocab+i is row i), held as ForecastRows gives them.
	Forecast []float32

	// Eagle3 is the EAGLE-3 head of an eaglet plan with a draft: its fc
	// runs in the target's last stage and BuildDraft exports the rest.
	Eagle3 *Eagle3Head

	// params, when set, keeps each tensor's parameter encoding for the
	// other variants of a stage (Export sets it per stage).
	params map[*model.Tensor]*Encoding
}

// paramEncoding is ParamEncoding, once per tensor while params is set.
func (o *Options) paramEncoding(t *model.Tensor) (*Encoding, error) {
	if e, ok := o.params[t]; ok {
		return e, nil
	}
	e, err := ParamEncoding(t, o.Container)
	if err == nil && o.params != nil {
		o.params[t] = e
	}
	return e, err
}

// MaskMin is the value of a masked attention_mask entry in the default
// mask encoding: the largest code decodes to 0 and code 0 to MaskMin
// (AI Hub Models clips its masks to [−50, 0], qnn-genie.md §1.2, §4).
const MaskMin = -50

// BuildStage builds the ONNX graph of one plan graph (a stage for one AR
// and CL) of model m, and its QNN encodings. Inputs and outputs are
// exactly the plan's: names, shapes and order. Weights become float32
// initializers holding every quantized weight's exact value; they are
// dequantized lazily when the graph is written, one tensor at a time,
// with the encodings round trip checked on the way.
//
// Matrices are MatMul initializers in [in, out] layout, named as the GGUF
// tensor; a tied head is a second initializer "output.weight". The token
// embedding is a Gather over token_embd.weight [vocab, hidden].
func BuildStage(m *model.Model, p *shard.Plan, pg *shard.Graph, opts Options) (*Graph, *Encodings, error) {
	if opts.Opset == 0 {
		opts.Opset = 17
	}
	switch {
	case opts.Container == 0:
		opts.Container = p.Container
	case opts.Container != p.Container:
		return nil, nil, fmt.Errorf("onnx: the plan sized its stages for the %s container, not %s; re-plan with --container %s", p.Container, opts.Container, opts.Container)
	}
	if err := checkPlan(m, p, len(opts.Forecast)); err != nil {
		return nil, nil, err
	}
	if pg.Stage < 0 || pg.Stage >= len(p.Stages) {
		return nil, nil, fmt.Errorf("onnx: graph %s: stage %d not in the plan", pg.Name, pg.Stage)
	}
	st := &p.Stages[pg.Stage]
	b := &builder{
		g: NewGraph(pg.Name), m: m, c: m.Config, p: p, pg: pg, opts: opts,
		ar: int64(pg.AR), cl: int64(pg.CL),
		consts: map[string]string{}, weights: map[string]string{},
		enc: &Encodings{Version: EncodingsVersion, ActivationEncodings: []Encoding{}, ParamEncodings: []Encoding{}},
	}
	if err := b.build(st); err != nil {
		return nil, nil, fmt.Errorf("onnx: graph %s: %w", pg.Name, err)
	}
	return b.g, b.enc, nil
}

// checkPlan refuses a plan made for another model, or whose embedding
// rows are not the model's vocabulary plus the forecast values given.
func checkPlan(m *model.Model, p *shard.Plan, forecast int) error {
	c := &m.Config
	if err := p.Fits(*c); err != nil {
		return fmt.Errorf("onnx: plan for model %q does not fit model %s: %w", p.Model.Name, m.Path, err)
	}
	if forecast%c.Hidden != 0 {
		return fmt.Errorf("onnx: %d forecast embedding values are not rows of hidden size %d", forecast, c.Hidden)
	}
	rows := c.VocabSize + forecast/c.Hidden
	if want := p.Dialog.EmbeddingRows; want != 0 && want != rows {
		if forecast == 0 {
			return fmt.Errorf("onnx: plan needs %d embedding rows, model %s has %d: give the %d forecast-token embeddings (--forecast-embeddings)",
				want, m.Path, c.VocabSize, want-c.VocabSize)
		}
		return fmt.Errorf("onnx: plan needs %d embedding rows, model %s has %d and %d forecast rows were given",
			want, m.Path, c.VocabSize, forecast/c.Hidden)
	}
	return nil
}

type builder struct {
	g    *Graph
	m    *model.Model
	c    model.Config
	p    *shard.Plan
	pg   *shard.Graph
	opts Options
	enc  *Encodings

	ar, cl  int64
	consts  map[string]string
	weights map[string]string

	x          string // current hidden states [1, AR, hidden]
	cosF, sinF string // RoPE tables expanded to [1, 1, AR, rotary_dim]
	ropePerm   string // partner index of each rotated dim

	err error // first error of a helper that returns a name
}

// fail records the first error of a helper that cannot return one.
func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *builder) build(st *shard.Stage) error {
	c := &b.c
	if c.ConvKernel == 1 {
		return fmt.Errorf("conv kernel 1 leaves no conv state to carry")
	}
	for _, t := range b.pg.Inputs {
		typ := Float
		switch t.DType {
		case shard.Int32:
			typ = Int32
		case shard.Float32:
		default:
			return fmt.Errorf("input %s: dtype %q", t.Name, t.DType)
		}
		b.g.Input(t.Name, typ, t.Shape...)
	}

	if st.Embedding && b.pg.Input(shard.InputEmbeds) != nil {
		b.x = shard.InputEmbeds // eaglet: Genie's LUT embeds the tokens
	} else if st.Embedding {
		emb := b.embedTable()
		if emb == "" {
			return fmt.Errorf("model has no token_embd.weight")
		}
		b.x = b.op("Gather", emb, shard.InputIDs)
	} else {
		b.x = shard.HiddenStates(st.Index - 1)
		if b.pg.Input(b.x) == nil {
			return fmt.Errorf("no input %s", b.x)
		}
	}
	switch {
	case b.pg.Input(shard.PositionIDsCos) != nil:
		b.ropeTables(shard.PositionIDsCos, shard.PositionIDsSin)
	case b.pg.Input(shard.PositionIDs) != nil:
		// Absolute positions: the graph looks its RoPE rows up itself.
		cos, sin, err := b.positionTables()
		if err != nil {
			return err
		}
		b.ropeTables(cos, sin)
	}
	taps := map[int]string{}
	for l := st.FirstLayer; l <= st.LastLayer; l++ {
		b.tap(st, l, taps)
		var err error
		if c.LayerKinds[l] == model.DeltaNet {
			err = b.deltaNet(l)
		} else {
			err = b.attention(l)
		}
		if err != nil {
			return fmt.Errorf("layer %d: %w", l, err)
		}
		if err := b.ffn(l); err != nil {
			return fmt.Errorf("layer %d: %w", l, err)
		}
	}
	if st.Head {
		b.tap(st, c.Layers, taps)
		if b.pg.Output(shard.LastHiddenStates) != nil {
			if err := b.lastHiddenStates(taps); err != nil {
				return err
			}
		}
		xn := b.rmsNorm(b.x, "output_norm.weight")
		head := "output.weight"
		if b.m.Tensor(head) == nil {
			head = "token_embd.weight" // tied
		}
		w, err := b.matrix(head, "output.weight")
		if err != nil {
			return err
		}
		b.g.Named(shard.Logits, "MatMul", []string{xn, w})
	} else {
		b.g.Named(shard.HiddenStates(st.Index), "Identity", []string{b.x})
	}

	if b.err != nil {
		return b.err
	}
	for _, t := range b.pg.Outputs {
		if !b.g.names[t.Name] {
			return fmt.Errorf("output %s is not computed by the stage", t.Name)
		}
		b.g.Output(t.Name, Float, t.Shape...)
	}
	return b.activations()
}

// activations writes one encoding per plan tensor with an encoding group
// that has a range; every tensor of a group (the _in and _out of one
// state, cos and sin) gets the same one.
func (b *builder) activations() error {
	for _, l := range [][]shard.Tensor{b.pg.Inputs, b.pg.Outputs} {
		for _, t := range l {
			if t.Encoding == "" {
				continue
			}
			var e Encoding
			if r, ok := b.opts.Ranges[t.Encoding]; ok {
				var err error
				if e, err = activation(t.Name, r); err != nil {
					return err
				}
			} else {
				switch t.Encoding {
				case shard.AttentionMask:
					e, _ = activation(t.Name, Range{MaskMin, 0})
				case shard.PositionIDsCos:
					// cos and sin reach the RoPE magnitude (above 1 for YaRN).
					r, err := b.c.Rope()
					if err != nil {
						return err
					}
					e = symmetric16(t.Name, max(1, r.Magnitude()))
				default:
					continue
				}
			}
			b.enc.ActivationEncodings = append(b.enc.ActivationEncodings, e)
		}
	}
	return nil
}

// --- graph helpers ---

func (b *builder) op(op string, inputs ...string) string { return b.g.Op(op, inputs) }

func (b *builder) opAttr(op string, inputs []string, attrs ...Attr) string {
	return b.g.Op(op, inputs, attrs...)
}

func (b *builder) constant(key string, t DataType, shape []int64, data []byte) string {
	if n, ok := b.consts[key]; ok {
		return n
	}
	n := b.g.Init(fmt.Sprintf("const_%d", len(b.consts)), t, shape, data)
	b.consts[key] = n
	return n
}

// ints is a 1-D int64 constant.
func (b *builder) ints(v ...int64) string {
	data := make([]byte, 8*len(v))
	for i, x := range v {
		for j := 0; j < 8; j++ {
			data[8*i+j] = byte(uint64(x) >> (8 * j))
		}
	}
	return b.constant(fmt.Sprint("i64", v), Int64, []int64{int64(len(v))}, data)
}

// scalar is a float32 scalar constant.
func (b *builder) scalar(v float32) string {
	return b.constant(fmt.Sprint("f32:", math.Float32bits(v)), Float, nil, f32Bytes([]float32{v}))
}

// floats is a float32 constant of the given shape.
func (b *builder) floats(shape []int64, v []float32) string {
	return b.constant(fmt.Sprint("f32s", shape, v), Float, shape, f32Bytes(v))
}

func (b *builder) zeros(shape ...int64) string {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return b.constant(fmt.Sprint("zeros", shape), Float, shape, make([]byte, 4*n))
}

func (b *builder) reshape(x string, shape ...int64) string {
	return b.op("Reshape", x, b.ints(shape...))
}

func (b *builder) transpose(x string, perm ...int64) string {
	return b.opAttr("Transpose", []string{x}, AttrInts("perm", perm...))
}

// reduce applies a reduction over the last axis, keeping it: the axes are
// an attribute before opset 18 and an input from 18 on.
func (b *builder) reduce(op, x string) string {
	if b.opts.Opset >= 18 {
		return b.opAttr(op, []string{x, b.ints(-1)}, AttrInt("keepdims", 1))
	}
	return b.opAttr(op, []string{x}, AttrInts("axes", -1), AttrInt("keepdims", 1))
}

// split cuts x along axis into pieces of the given sizes.
func (b *builder) split(x string, axis int64, sizes ...int64) []string {
	outs := make([]string, len(sizes))
	for i := range outs {
		outs[i] = fmt.Sprintf("%s_split%d", x, i)
	}
	b.g.Node("Split", []string{x, b.ints(sizes...)}, outs, AttrInt("axis", axis))
	return outs
}

func (b *builder) silu(x string) string { return b.op("Mul", x, b.op("Sigmoid", x)) }

// rmsNorm is x / sqrt(mean(x²) + eps) ⊙ w over the last axis, in the ops
// HTP runs natively (ReduceMean, Add, Sqrt, Div, Mul).
func (b *builder) rmsNorm(x, weight string) string {
	ms := b.reduce("ReduceMean", b.op("Mul", x, x))
	r := b.op("Sqrt", b.op("Add", ms, b.scalar(b.c.RMSEps)))
	return b.op("Mul", b.op("Div", x, r), b.vector(weight))
}

// vector adds a 1-D (or any kept-as-stored) tensor as a float32
// initializer named as in the model.
func (b *builder) vector(name string) string {
	if n, ok := b.weights[name]; ok {
		return n
	}
	t := b.m.Tensor(name)
	if t == nil {
		b.fail(fmt.Errorf("model has no tensor %q", name))
		return name
	}
	shape := []int64{t.Elements()}
	n := b.g.LazyInit(name, "", Float, shape, func(_ context.Context, w io.Writer) error { return writeRows(w, t) })
	b.weights[name] = n
	return n
}

// table adds a matrix in its stored row order ([rows, Dims[0]]): the token
// embedding that Gather indexes. "" if the model lacks it.
func (b *builder) table(name string) string {
	t := b.m.Tensor(name)
	if t == nil {
		return ""
	}
	enc, err := b.opts.paramEncoding(t)
	if err != nil {
		b.fail(err)
		return name
	}
	if enc != nil {
		b.enc.ParamEncodings = append(b.enc.ParamEncodings, *enc)
	}
	return b.g.LazyInit(name, "", Float, []int64{t.Rows(), t.Dims[0]}, func(ctx context.Context, w io.Writer) error { return writeMatrix(ctx, w, t, enc, false) })
}

// embedTable is token_embd.weight as a Gather table, with the forecast
// rows (Options.Forecast) appended and its encoding extended over them.
func (b *builder) embedTable() string {
	const name = "token_embd.weight"
	if len(b.opts.Forecast) == 0 {
		return b.table(name)
	}
	t := b.m.Tensor(name)
	if t == nil {
		return ""
	}
	enc, err := b.opts.paramEncoding(t)
	if err != nil {
		b.fail(err)
		return name
	}
	rows, scales, err := forecastRows(t, enc, b.opts.Forecast)
	if err != nil {
		b.fail(err)
		return name
	}
	var table *Encoding
	if enc != nil {
		e := *enc
		e.Scale = append(append(Float32s(nil), enc.Scale...), scales...)
		e.Offset = slices.Clone(enc.Offset)
		for range scales {
			e.Offset = append(e.Offset, enc.Offset[0])
		}
		table = &e
		b.enc.ParamEncodings = append(b.enc.ParamEncodings, e)
	}
	n := len(rows) / int(t.Dims[0])
	return b.g.LazyInit(name, "", Float, []int64{t.Rows() + int64(n), t.Dims[0]}, func(ctx context.Context, w io.Writer) error {
		if err := writeMatrix(ctx, w, t, table, false); err != nil {
			return err
		}
		_, err := w.Write(f32Bytes(rows))
		return err
	})
}

// matrix adds the ggml matrix src as a MatMul weight [in, out] named
// name, with its parameter encoding.
func (b *builder) matrix(src, name string) (string, error) {
	return b.matrixOf(b.m, src, name)
}

// matrixOf is matrix with src from m.
func (b *builder) matrixOf(m *model.Model, src, name string) (string, error) {
	if n, ok := b.weights[name]; ok {
		return n, nil
	}
	t := m.Tensor(src)
	if t == nil {
		return "", fmt.Errorf("model has no tensor %q", src)
	}
	if len(t.Dims) != 2 {
		return "", fmt.Errorf("tensor %q: dims %v, want a matrix", src, t.Dims)
	}
	enc, err := b.opts.paramEncoding(t)
	if err != nil {
		return "", err
	}
	if enc != nil {
		e := *enc
		e.Name = name
		b.enc.ParamEncodings = append(b.enc.ParamEncodings, e)
	}
	n := b.g.LazyInit(name, "", Float, []int64{t.Dims[0], t.Rows()}, func(ctx context.Context, w io.Writer) error { return writeMatrix(ctx, w, t, enc, true) })
	b.weights[name] = n
	return n, nil
}

// linear is x·W (+ bias when the model has one).
func (b *builder) linear(x, weight string) (string, error) {
	w, err := b.matrix(weight, weight)
	if err != nil {
		return "", err
	}
	y := b.op("MatMul", x, w)
	if bias := strings.TrimSuffix(weight, ".weight") + ".bias"; b.m.Tensor(bias) != nil {
		y = b.op("Add", y, b.vector(bias))
	}
	return y, nil
}

// linears applies linear to x once per weight, in order.
func (b *builder) linears(x string, weights ...string) ([]string, error) {
	ys := make([]string, len(weights))
	for i, w := range weights {
		y, err := b.linear(x, w)
		if err != nil {
			return nil, err
		}
		ys[i] = y
	}
	return ys, nil
}

// --- blocks ---

// ropeTables expands the [1,1,AR,R/2] cos/sin inputs to the R rotated
// dims once per stage, so each head rotates as y = x·cos' + x[perm]·sin'
// in the model's convention: NEOX pairs dim i with i+R/2, ggml NORM pairs
// 2i with 2i+1 (llama GGUFs). sin' carries the sign of the rotation.
func (b *builder) ropeTables(cosIn, sinIn string) {
	h := b.c.RopeDim / 2
	idx, perm := make([]int64, 2*h), make([]int64, 2*h)
	sign := make([]float32, 2*h)
	for i := 0; i < h; i++ {
		if b.c.RopeNeox {
			idx[i], idx[i+h] = int64(i), int64(i)
			perm[i], perm[i+h] = int64(i+h), int64(i)
			sign[i], sign[i+h] = -1, 1
		} else {
			idx[2*i], idx[2*i+1] = int64(i), int64(i)
			perm[2*i], perm[2*i+1] = int64(2*i+1), int64(2*i)
			sign[2*i], sign[2*i+1] = -1, 1
		}
	}
	gi := b.ints(idx...)
	b.cosF = b.opAttr("Gather", []string{cosIn, gi}, AttrInt("axis", 3))
	sin := b.opAttr("Gather", []string{sinIn, gi}, AttrInt("axis", 3))
	b.sinF = b.op("Mul", sin, b.floats([]int64{int64(2 * h)}, sign))
	b.ropePerm = b.ints(perm...)
}

// positionTables gathers the [1,1,AR,R/2] cos and sin rows of the
// position_ids input from constant tables of positions 0…CL−1, built as
// ggml's rope cache (and the runtime) builds them, scaling included
// (model.Rope). The rows are the ones a rope plan feeds as
// position_ids_cos/_sin.
func (b *builder) positionTables() (cos, sin string, err error) {
	r, err := b.c.Rope()
	if err != nil {
		return "", "", err
	}
	h := r.Pairs()
	cv, sv := make([]float32, int(b.cl)*h), make([]float32, int(b.cl)*h)
	for p := int64(0); p < b.cl; p++ {
		r.Table(int32(p), cv[p*int64(h):(p+1)*int64(h)], sv[p*int64(h):(p+1)*int64(h)])
	}
	shape := []int64{b.cl, int64(h)}
	ct := b.constant("rope cos table", Float, shape, f32Bytes(cv))
	st := b.constant("rope sin table", Float, shape, f32Bytes(sv))
	return b.op("Gather", ct, shard.PositionIDs), b.op("Gather", st, shard.PositionIDs), nil
}

// rope rotates the first RopeDim dims of x [1, heads, AR, D].
func (b *builder) rope(x string) string {
	r, d := int64(b.c.RopeDim), int64(b.c.HeadDim)
	rot, pass := x, ""
	if r < d {
		parts := b.split(x, 3, r, d-r)
		rot, pass = parts[0], parts[1]
	}
	partner := b.opAttr("Gather", []string{rot, b.ropePerm}, AttrInt("axis", 3))
	y := b.op("Add", b.op("Mul", rot, b.cosF), b.op("Mul", partner, b.sinF))
	if pass != "" {
		y = b.opAttr("Concat", []string{y, pass}, AttrInt("axis", 3))
	}
	return y
}

// attention is a (gated) GQA attention block over concat(past, new).
func (b *builder) attention(l int) error {
	c := &b.c
	if b.cosF == "" {
		return fmt.Errorf("attention without position_ids_cos/_sin inputs")
	}
	mask := shard.AttentionMask
	if b.pg.Input(mask) == nil {
		return fmt.Errorf("attention without an %s input", mask)
	}
	nh, nkv, d, ar := int64(c.Heads), int64(c.KVHeads), int64(c.HeadDim), b.ar
	p := func(s string) string { return fmt.Sprintf("blk.%d.%s", l, s) }

	xn := b.rmsNorm(b.x, p("attn_norm.weight"))
	qkv, err := b.linears(xn, p("attn_q.weight"), p("attn_k.weight"), p("attn_v.weight"))
	if err != nil {
		return err
	}
	q, k, v := qkv[0], qkv[1], qkv[2]
	var gate string
	if c.AttnOutputGate {
		// attn_q rows are [q_h | gate_h] per head.
		parts := b.split(b.reshape(q, 1, ar, nh, 2*d), 3, d, d)
		q, gate = parts[0], b.reshape(parts[1], 1, ar, nh*d)
	} else {
		q = b.reshape(q, 1, ar, nh, d)
	}
	k = b.reshape(k, 1, ar, nkv, d)
	v = b.reshape(v, 1, ar, nkv, d)
	if c.QKNorm {
		q = b.rmsNorm(q, p("attn_q_norm.weight"))
		k = b.rmsNorm(k, p("attn_k_norm.weight"))
	}
	o := b.attend(l, q, k, v)
	if gate != "" {
		o = b.op("Mul", o, b.op("Sigmoid", gate))
	}
	out, err := b.linear(o, p("attn_output.weight"))
	if err != nil {
		return err
	}
	b.x = b.op("Add", b.x, out)
	return nil
}

// attend is attention over concat(past, new) of q [1, AR, nh, D] and k, v
// [1, AR, nkv, D] after RoPE, writing layer l's KV outputs; it returns
// the heads' outputs [1, AR, nh·D].
func (b *builder) attend(l int, q, k, v string) string {
	c := &b.c
	nh, nkv, d, ar := int64(c.Heads), int64(c.KVHeads), int64(c.HeadDim), b.ar
	mask := shard.AttentionMask
	q = b.rope(b.transpose(q, 0, 2, 1, 3)) // [1, nh, AR, D]
	k = b.rope(b.transpose(k, 0, 2, 1, 3)) // [1, nkv, AR, D]

	kOut := b.g.Named(shard.PastKey(l, "out"), "Transpose", []string{k}, AttrInts("perm", 1, 0, 3, 2))   // [nkv, 1, D, AR]
	vOut := b.g.Named(shard.PastValue(l, "out"), "Transpose", []string{v}, AttrInts("perm", 2, 0, 1, 3)) // [nkv, 1, AR, D]
	keys, vals := kOut, vOut
	if in := shard.PastKey(l, "in"); b.pg.Input(in) != nil {
		keys = b.opAttr("Concat", []string{in, kOut}, AttrInt("axis", 3))
		vals = b.opAttr("Concat", []string{shard.PastValue(l, "in"), vOut}, AttrInt("axis", 2))
	}
	// Query head h reads kv head h / (nh/nkv): group the heads.
	qg := b.reshape(q, nkv, nh/nkv, ar, d)
	scores := b.op("Mul", b.op("MatMul", qg, keys), b.scalar(float32(1/math.Sqrt(float64(d)))))
	probs := b.opAttr("Softmax", []string{b.op("Add", scores, mask)}, AttrInt("axis", -1))
	o := b.op("MatMul", probs, vals)                        // [nkv, group, AR, D]
	o = b.transpose(b.reshape(o, 1, nh, ar, d), 0, 2, 1, 3) // [1, AR, nh, D]
	o = b.reshape(o, 1, ar, nh*d)
	return o
}

// ffn is the SwiGLU MLP with its pre-norm and residual.
func (b *builder) ffn(l int) error {
	p := func(s string) string { return fmt.Sprintf("blk.%d.%s", l, s) }
	norm := p("ffn_norm.weight")
	if b.m.Tensor(norm) == nil {
		norm = p("post_attention_norm.weight")
	}
	xn := b.rmsNorm(b.x, norm)
	gu, err := b.linears(xn, p("ffn_gate.weight"), p("ffn_up.weight"))
	if err != nil {
		return err
	}
	down, err := b.linear(b.op("Mul", b.silu(gu[0]), gu[1]), p("ffn_down.weight"))
	if err != nil {
		return err
	}
	b.x = b.op("Add", b.x, down)
	return nil
}

// deltaNet is a Gated DeltaNet block (model-architectures.md §5.1): the
// causal depthwise conv over the carried raw rows, then the per-token
// delta rule unrolled over the AR tokens in order.
func (b *builder) deltaNet(l int) error {
	c := &b.c
	p := func(s string) string { return fmt.Sprintf("blk.%d.%s", l, s) }
	hk, hv, dk, dv := int64(c.SSMKeyHeads), int64(c.SSMValueHeads), int64(c.SSMKeyDim), int64(c.SSMValueDim)
	kc, ar := int64(c.ConvKernel), b.ar
	keyDim, valueDim, convDim := hk*dk, hv*dv, int64(c.ConvDim())

	xn := b.rmsNorm(b.x, p("attn_norm.weight"))
	ys, err := b.linears(xn, p("attn_qkv.weight"), p("attn_gate.weight"), p("ssm_beta.weight"), p("ssm_alpha.weight"))
	if err != nil {
		return err
	}
	qkv, z, beta, alpha := ys[0], ys[1], ys[2], ys[3]

	// Conv over [state (K−1 raw rows) | this call's rows], channel-major.
	convIn, ssmIn := b.zeros(convDim, kc-1), b.zeros(hv, dk, dv) // AR-c: no carried state
	if in := shard.PastConv(l, "in"); b.pg.Input(in) != nil {
		convIn, ssmIn = in, shard.PastSSM(l, "in")
	}
	seq := b.opAttr("Concat", []string{convIn, b.transpose(b.reshape(qkv, ar, convDim), 1, 0)}, AttrInt("axis", 1))
	b.g.Named(shard.PastConv(l, "out"), "Slice", []string{seq, b.ints(ar), b.ints(ar + kc - 1), b.ints(1)})
	kernel := b.m.Tensor(p("ssm_conv1d.weight"))
	if kernel == nil {
		return fmt.Errorf("model has no %s", p("ssm_conv1d.weight"))
	}
	kw := b.g.LazyInit(kernel.Name, "", Float, []int64{convDim, 1, kc}, func(_ context.Context, w io.Writer) error { return writeRows(w, kernel) })
	u := b.opAttr("Conv", []string{b.reshape(seq, 1, convDim, kc-1+ar), kw},
		AttrInt("group", convDim), AttrInts("kernel_shape", kc))
	u = b.transpose(b.reshape(b.silu(u), convDim, ar), 1, 0) // [AR, convDim]
	parts := b.split(u, 1, keyDim, keyDim, valueDim)

	l2 := func(x string) string {
		ss := b.reduce("ReduceSumSquare", x)
		return b.op("Div", x, b.op("Sqrt", b.op("Add", ss, b.scalar(1e-6))))
	}
	q := b.op("Mul", l2(b.reshape(parts[0], ar, hk, dk)), b.scalar(1/float32(math.Sqrt(float64(dk)))))
	k := l2(b.reshape(parts[1], ar, hk, dk))
	v := b.reshape(parts[2], ar, hv, dv)
	if hv != hk {
		idx := make([]int64, hv)
		r := hv / hk
		for h := range idx {
			idx[h] = int64(h) / r
			if c.SSMTiledHeads {
				idx[h] = int64(h) % hk
			}
		}
		q = b.opAttr("Gather", []string{q, b.ints(idx...)}, AttrInt("axis", 1))
		k = b.opAttr("Gather", []string{k, b.ints(idx...)}, AttrInt("axis", 1))
	}
	bt := b.op("Sigmoid", b.reshape(beta, ar, hv))
	g := b.op("Mul", b.op("Softplus", b.op("Add", b.reshape(alpha, ar, hv), b.vector(p("ssm_dt.bias")))), b.vector(p("ssm_a")))
	al := b.op("Exp", g)

	tok := func(x string) []string {
		if ar == 1 {
			return []string{x}
		}
		return b.split(x, 0, slices.Repeat([]int64{1}, int(ar))...)
	}
	qs, ks, vs, as, bs := tok(q), tok(k), tok(v), tok(al), tok(bt)
	s := ssmIn
	outs := make([]string, ar)
	for i := range outs {
		qr := b.reshape(qs[i], hv, 1, dk)
		kr := b.reshape(ks[i], hv, 1, dk)
		kcol := b.reshape(ks[i], hv, dk, 1)
		vi := b.reshape(vs[i], hv, 1, dv)
		s = b.op("Mul", s, b.reshape(as[i], hv, 1, 1))
		m := b.op("MatMul", kr, s)
		delta := b.op("Mul", b.op("Sub", vi, m), b.reshape(bs[i], hv, 1, 1))
		if i == len(outs)-1 {
			s = b.g.Named(shard.PastSSM(l, "out"), "Add", []string{s, b.op("MatMul", kcol, delta)})
		} else {
			s = b.op("Add", s, b.op("MatMul", kcol, delta))
		}
		outs[i] = b.op("MatMul", qr, s) // [Hv, 1, Dv]
	}
	o := outs[0]
	if ar > 1 {
		o = b.opAttr("Concat", outs, AttrInt("axis", 1))
	}
	o = b.transpose(o, 1, 0, 2) // [AR, Hv, Dv]
	o = b.rmsNorm(o, p("ssm_norm.weight"))
	o = b.op("Mul", o, b.silu(b.reshape(z, ar, hv, dv)))
	out, err := b.linear(b.reshape(o, 1, ar, valueDim), p("ssm_out.weight"))
	if err != nil {
		return err
	}
	b.x = b.op("Add", b.x, out)
	return nil
}
