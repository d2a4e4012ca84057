// Package shard plans how a model is cut into stages for Qualcomm's HTP and
// describes every input and output of every stage graph exactly as Genie
// expects them; Check proves a plan consistent with Genie's I/O contract
// before anything is built.
//
// The facts behind the rules are in reference/qnn-genie.md; plan.json is
// documented in SCHEMA.md.
package shard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/model"
)

// Version is the plan.json schema version this package writes and reads.
const Version = 2

// Plan is a model split into stages, with one graph per stage and (AR, CL)
// variant and the I/O surfaces of each graph.
type Plan struct {
	Version int       `json:"version"`
	Model   ModelInfo `json:"model"`

	Split         string `json:"split"` // "layers-per-stage", "stages" or "bytes"
	MaxStageBytes int64  `json:"max_stage_bytes"`
	// Container is the width Q1_0/Q2_0 codes are exported in; stage bytes
	// are device bytes in it, and the exporter refuses another.
	Container   Container  `json:"container"`
	Positional  Positional `json:"positional_encoding"`
	RopeDim     int        `json:"rope_dim,omitempty"` // Genie rope-dim: rotated dims / 2
	VTCMMB      int        `json:"vtcm_mb"`
	ContextSize int        `json:"context_size"` // Genie context.size
	Dialog      DialogPlan `json:"dialog"`

	Stages   []Stage   `json:"stages"`
	Variants []Variant `json:"variants"`
	Graphs   []Graph   `json:"graphs"`
	// Draft is the eaglet draft engine's graphs (eaglet with a head only).
	Draft *DraftPlan `json:"draft,omitempty"`
}

// ModelInfo summarises the model.Config the plan was made from.
type ModelInfo struct {
	Name      string `json:"name"` // as used in graph names
	Arch      string `json:"arch"`
	Layers    int    `json:"layers"`
	Hidden    int    `json:"hidden"`
	FFN       int    `json:"ffn"`
	Vocab     int    `json:"vocab"`
	Heads     int    `json:"heads"`
	KVHeads   int    `json:"kv_heads"`
	HeadDim   int    `json:"head_dim"`
	RotaryDim int    `json:"rotary_dim"` // rotated dims per head
	// RopeScaling is the RoPE scaling type (model.RopeScalingType):
	// Genie's rope encoder computes llama3 tables, not linear or yarn ones.
	RopeScaling   string   `json:"rope_scaling,omitempty"`
	ContextLength int      `json:"context_length"`
	LayerKinds    []string `json:"layer_kinds"` // "attention" | "deltanet" per layer
	ConvKernel    int      `json:"conv_kernel,omitempty"`
	ConvDim       int      `json:"conv_dim,omitempty"`
	SSMValueHeads int      `json:"ssm_value_heads,omitempty"`
	SSMKeyDim     int      `json:"ssm_key_dim,omitempty"`
	SSMValueDim   int      `json:"ssm_value_dim,omitempty"`
}

// Hybrid reports whether any layer carries Gated DeltaNet state.
func (m *ModelInfo) Hybrid() bool { return slices.Contains(m.LayerKinds, model.DeltaNet.String()) }

// DialogPlan is the dialog with the sizes derived from it.
type DialogPlan struct {
	Dialog
	Nodes int `json:"nodes,omitempty"` // ssd-q1 draft-tree nodes
	// StepTokens is m: tokens per speculative step, the selection-mask
	// length (1 for basic, which passes no mask).
	StepTokens int `json:"step_tokens"`
	// PrefixKV is the KV entries restored before the prompt that never
	// enter Genie's token history (the ssd-q1 forecast prefix).
	PrefixKV int `json:"prefix_kv"`
	// EmbeddingRows is the token-embedding rows the first stage needs:
	// the vocabulary plus the ssd-q1 forecast embeddings.
	EmbeddingRows int `json:"embedding_rows"`
	// ProbePromptTokens is the prompt length the variants' step numbers
	// assume.
	ProbePromptTokens int `json:"probe_prompt_tokens"`
}

// Stage is a run of consecutive layers that becomes one context binary.
type Stage struct {
	Index       int      `json:"index"` // 0-based; graph names count from 1
	FirstLayer  int      `json:"first_layer"`
	LastLayer   int      `json:"last_layer"`            // inclusive
	Bytes       int64    `json:"bytes"`                 // device bytes of its weights in the plan's container, including embedding/head
	QModelBytes int64    `json:"qmodel_bytes"`          // the same weights' bytes in the qmodel (0 if unknown)
	WeightType  string   `json:"weight_type,omitempty"` // lowest-bit weight type, "" if unknown
	Embedding   bool     `json:"embedding"`             // holds token_embd, takes input_ids
	Head        bool     `json:"head"`                  // holds the output head, produces logits
	Graphs      []string `json:"graphs"`                // one per variant, in variant order
}

// OneBit reports whether the stage holds weights of fewer than 2 bits.
func (s *Stage) OneBit() bool {
	t, err := gguf.ParseType(s.WeightType)
	return err == nil && t.BitsPerWeight() < 2
}

// Variant modes.
const (
	ModeKV  = "kv"   // CL > AR: past KV is read from past_*_in
	ModeARc = "ar-c" // CL == AR: Genie re-processes all history each call
)

// Variant is one (AR, CL) shape every stage is built for, with what the
// dialog's first speculative step looks like on it after a prompt of
// Dialog.ProbePromptTokens tokens (qnn-genie.md §1.3).
type Variant struct {
	AR   int    `json:"ar"`
	CL   int    `json:"cl"`
	Mode string `json:"mode"`
	// MaskLen is the selection-mask length a step on this variant passes:
	// StepTokens on the variant Genie picks for speculative steps (the
	// smallest AR ≥ StepTokens per CL), otherwise 0 (no mask).
	MaskLen int `json:"mask_len"`
	// NProcess is the entries Genie's KV manager processes in that step:
	// the new tokens, plus n_past on AR-c variants.
	NProcess int `json:"n_process"`
	// TokenHistory is the token history Genie needs for the step: n_past
	// (prefix + prompt) on AR-c variants, 0 on KV variants.
	TokenHistory int `json:"token_history"`
}

// Graph is one stage compiled for one variant.
type Graph struct {
	Name    string   `json:"name"`
	Stage   int      `json:"stage"`
	AR      int      `json:"ar"`
	CL      int      `json:"cl"`
	Inputs  []Tensor `json:"inputs"`
	Outputs []Tensor `json:"outputs"`
}

// Tensor is one graph input or output.
type Tensor struct {
	Name  string  `json:"name"`
	Shape []int64 `json:"shape"`
	DType string  `json:"dtype"` // "int32" | "float32" at the ONNX boundary
	// Layout names the axes, outermost first (e.g. "kv_head,batch,head_dim,position").
	Layout string `json:"layout"`
	// Encoding is the activation-encoding group: tensors in one group get
	// one scale/offset. "" means the tensor keeps its dtype on the device.
	Encoding string `json:"encoding,omitempty"`
}

// Step is what Genie's KV manager sees in one decode step.
type Step struct {
	MaskLen         int // selection-mask entries passed (0: none)
	NProcess        int // entries Genie expects the mask to have
	NPast           int // KV positions before the step
	HistoryExpected int // token history Genie needs (AR-c: n_past)
	HistoryHeld     int // tokens Genie holds in token_history
}

// StepOn computes the first speculative step after a prompt of
// promptTokens tokens on a graph of the given mode, for dialog d, with
// maskLen entries in the selection mask (qnn-genie.md §0, §1.3): on KV
// graphs n_process is the new tokens; on AR-c graphs n_past tokens are
// re-processed, so n_process = new + n_past and Genie needs n_past tokens
// of history, of which it holds only the processed ones (the ssd-q1
// forecast prefix is restored as KV and never enters the history).
func (d *DialogPlan) StepOn(mode string, maskLen, promptTokens int) Step {
	s := Step{
		MaskLen:     maskLen,
		NProcess:    d.StepTokens,
		NPast:       d.PrefixKV + promptTokens,
		HistoryHeld: promptTokens,
	}
	if mode == ModeARc {
		s.NProcess += s.NPast
		s.HistoryExpected = s.NPast
	}
	return s
}

// GraphName is Genie's graph name for stage index (0-based) of stages:
// {model}_ar{AR}_cl{CL}_{NN}_of_{MM}, zero-padded so lexical order is
// stage order.
func GraphName(modelName string, ar, cl, index, stages int) string {
	w := max(2, len(fmt.Sprint(stages)))
	return fmt.Sprintf("%s_ar%d_cl%d_%0*d_of_%0*d", modelName, ar, cl, w, index+1, w, stages)
}

// SanitizeName turns a model name into a graph-name prefix: letters,
// digits and '_' only (graph names become C identifiers in QNN model
// libraries), never starting with a digit.
func SanitizeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		s = "m" + s
	}
	return s
}

// NewPlan splits a model with configuration cfg into stages and lays out
// every graph's I/O. s holds the weight bytes of each layer, of the token
// embedding (first stage) and of the output head with its norm (last
// stage), on the device and in the qmodel; stages are cut by device bytes.
// For a tied model s.Head includes the embedding again, since the last
// stage needs its own copy; in a single stage the qmodel holds it once,
// while the exported graph still declares the head as a second initializer.
func NewPlan(cfg model.Config, s Sizes, name string, opts Options) (*Plan, error) {
	if err := checkConfig(&cfg); err != nil {
		return nil, fmt.Errorf("shard: model %s: %w", name, err)
	}
	if len(s.Layers) != cfg.Layers || (s.QLayers != nil && len(s.QLayers) != cfg.Layers) {
		return nil, fmt.Errorf("shard: model %s: %d layer sizes (%d in the qmodel) for %d layers", name, len(s.Layers), len(s.QLayers), cfg.Layers)
	}
	for i, b := range s.Layers {
		if b < 0 || (s.QLayers != nil && s.QLayers[i] < 0) {
			return nil, fmt.Errorf("shard: model %s: layer %d has a negative size", name, i)
		}
	}
	if s.Head < 0 || s.Embed < 0 || s.QHead < 0 || s.QEmbed < 0 {
		return nil, fmt.Errorf("shard: model %s: negative embedding or head size", name)
	}
	container := s.Container
	switch {
	case container == 0:
		container = opts.Container
	case opts.Container != 0 && opts.Container != container:
		return nil, fmt.Errorf("shard: model %s: sizes measured in the %s container, but the options ask for %s", name, container, opts.Container)
	}
	if container == 0 {
		container = Container4Bit
	}
	if !container.Valid() {
		return nil, fmt.Errorf("shard: model %s: container %d bits, want 4 or 8", name, int(container))
	}
	if opts.LayerTypes == nil {
		opts.LayerTypes = s.LayerTypes
	}
	layerBytes := s.Layers
	var headBytes, embedBytes int64
	if t := cfg.RopeScaling.Type; opts.Positional == "" && t != model.RopeNoScaling && t != model.RopeLlama3 {
		// Genie computes cos/sin tables only with llama3 scaling
		// (RuleRopeScaling); absolute positions let the graphs hold them.
		opts.Positional = Absolute
	}
	o, err := opts.withDefaults(cfg.Layers, cfg.ContextLength)
	if err != nil {
		return nil, fmt.Errorf("shard: model %s: %w", name, err)
	}

	p := &Plan{
		Version:       Version,
		Model:         modelInfo(&cfg, SanitizeName(name)),
		MaxStageBytes: o.MaxStageBytes,
		Container:     container,
		Positional:    o.Positional,
		VTCMMB:        o.VTCMMB,
		ContextSize:   o.ContextSize,
	}
	if o.Positional == Rope {
		p.RopeDim = ropeDim(&cfg) / 2
	}
	p.Dialog = DialogPlan{
		Dialog:            o.Dialog,
		Nodes:             o.Dialog.Nodes(),
		StepTokens:        o.Dialog.StepTokens(),
		EmbeddingRows:     cfg.VocabSize,
		ProbePromptTokens: o.ProbePromptTokens,
	}
	if o.Dialog.Type == SSD {
		p.Dialog.PrefixKV = o.Dialog.ForecastPrefix
		p.Dialog.EmbeddingRows += o.Dialog.ForecastTokenCount
	}

	if o.EagletHead != nil {
		p.Draft = &DraftPlan{Head: *o.EagletHead}
		if err := p.Draft.Head.validate(&p.Model); err != nil {
			return nil, fmt.Errorf("shard: model %s: %w", name, err)
		}
		if p.Draft.Head.FCBytes == 0 {
			// Unknown: fc.weight [3·hidden, hidden] as float32, the
			// most a weight takes on the device.
			p.Draft.Head.FCBytes = 3 * int64(cfg.Hidden) * int64(cfg.Hidden) * 4
		}
	}
	embedBytes, headBytes = p.endBytes(&s)

	// Each layer's cost carries the embedding (first) or head (last) so
	// no split can leave them on their own.
	cost := slices.Clone(layerBytes)
	cost[0] += embedBytes
	cost[len(cost)-1] += headBytes
	for i, c := range cost {
		if c > o.MaxStageBytes {
			what := fmt.Sprintf("layer %d", i)
			switch {
			case i == 0 && embedBytes > 0:
				what += " with the token embedding"
			case i == len(cost)-1 && headBytes > 0:
				what += " with the output head"
			}
			return nil, fmt.Errorf("shard: model %s: %s is %s on the device (%s container), over the %s stage limit, and a layer cannot be split further; raise the limit or quantize harder",
				name, what, bytesize.Format(c), container, bytesize.Format(o.MaxStageBytes))
		}
	}
	var sizes []int // layers per stage
	switch {
	case o.LayersPerStage > 0:
		p.Split = "layers-per-stage"
		for n := cfg.Layers; n > 0; n -= o.LayersPerStage {
			sizes = append(sizes, min(n, o.LayersPerStage))
		}
	case o.Stages > 0:
		p.Split = "stages"
		for i := range o.Stages {
			n := cfg.Layers / o.Stages
			if i < cfg.Layers%o.Stages {
				n++
			}
			sizes = append(sizes, n)
		}
	default:
		p.Split = "bytes"
		sizes = balance(cost, o.MaxStageBytes)
	}
	first := 0
	for i, n := range sizes {
		st := Stage{
			Index:      i,
			FirstLayer: first,
			LastLayer:  first + n - 1,
			Embedding:  i == 0,
			Head:       i == len(sizes)-1,
		}
		st.Bytes, st.QModelBytes, st.WeightType = s.stage(&st, o.LayerTypes, cfg.TiedEmbeddings, embedBytes, headBytes)
		p.Stages = append(p.Stages, st)
		first += n
	}

	for _, ar := range o.AR {
		for _, cl := range o.CL {
			mode := ModeKV
			if ar == cl {
				mode = ModeARc
			}
			p.Variants = append(p.Variants, Variant{AR: ar, CL: cl, Mode: mode})
		}
	}
	for _, v := range p.Variants {
		for si := range p.Stages {
			g := p.buildGraph(&cfg, &p.Stages[si], v)
			p.Stages[si].Graphs = append(p.Stages[si].Graphs, g.Name)
			p.Graphs = append(p.Graphs, g)
		}
	}
	if p.Draft != nil {
		p.buildDraft(p.Draft.Head)
	}
	p.fillSteps()
	// What a plan is written with, it must be read back with.
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("shard: model %s: %w", name, err)
	}
	return p, nil
}

// endBytes is what the first stage's graph (embed) and the last stage's
// (head) hold on the device beyond their layers, as the exporter writes
// them for p's dialog: the embedding table with the plan's embedding rows
// (ssd-q1's forecast rows are rows of it, in its layout) unless the graph
// takes embeddings (eaglet: Genie's LUT embeds the tokens), and the head
// with, for an eaglet draft, the EAGLE-3 head's fc (Draft.Head.FCBytes)
// that makes last_hidden_states from the taps. NewPlan and SizedFor size
// the end stages with it.
func (p *Plan) endBytes(s *Sizes) (embed, head int64) {
	embed, head = s.Embed, s.Head
	if v, rows := int64(p.Model.Vocab), int64(p.Dialog.EmbeddingRows); v > 0 && rows > v {
		embed += (s.Embed*(rows-v) + v - 1) / v // whole rows: exact
	}
	if p.Dialog.Type == Eaglet {
		embed = 0
	}
	if p.Draft != nil {
		head += p.Draft.Head.FCBytes
	}
	return embed, head
}

// stage is what st's layers, with the embedding (embed device bytes) in
// the first stage and the head (head device bytes) in the last, weigh in
// s: device bytes, qmodel bytes (0 if s has no QLayers and no embedding or
// head) and the lowest-bit weight type among types (per layer, the last
// one standing for the rest; "" if none). NewPlan sizes stages with it,
// and SizedFor measures a model with it, both with Plan.endBytes.
func (s *Sizes) stage(st *Stage, types []gguf.Type, tied bool, embed, head int64) (dev, q int64, weightType string) {
	for l := st.FirstLayer; l <= st.LastLayer; l++ {
		dev += s.Layers[l]
		if s.QLayers != nil {
			q += s.QLayers[l]
		}
		if len(types) > 0 {
			t := types[min(l, len(types)-1)]
			if cur, err := gguf.ParseType(weightType); err != nil || t.BitsPerWeight() < cur.BitsPerWeight() {
				weightType = t.String()
			}
		}
	}
	if st.Embedding {
		dev += embed
		q += s.QEmbed
	}
	if st.Head {
		dev += head
		q += s.QHead
		if st.Embedding && tied { // in the qmodel a tied head in the embedding's stage is the same tensor
			q -= min(s.QEmbed, s.QHead)
		}
	}
	return dev, q, weightType
}

// fillSteps records, per variant, the probe step's mask length, n_process
// and token history. Genie runs a speculative step on the smallest AR that
// holds its tokens (kvmanager.cpp prepareInferenceStrategy), per CL.
func (p *Plan) fillSteps() {
	d := &p.Dialog
	for i := range p.Variants {
		v := &p.Variants[i]
		v.MaskLen = 0
		if d.Speculative() && p.stepVariant(v.CL) == v.AR {
			v.MaskLen = d.StepTokens
		}
		s := d.StepOn(v.Mode, v.MaskLen, d.ProbePromptTokens)
		v.NProcess, v.TokenHistory = s.NProcess, s.HistoryExpected
	}
}

// stepVariant is the smallest AR ≥ StepTokens among variants of context
// length cl, or 0 if none holds a step.
func (p *Plan) stepVariant(cl int) int {
	best := 0
	for _, v := range p.Variants {
		if v.CL == cl && v.AR >= p.Dialog.StepTokens && (best == 0 || v.AR < best) {
			best = v.AR
		}
	}
	return best
}

// balance splits costs into the fewest consecutive runs of at most limit,
// then makes the largest run as small as possible for that count. Every
// single cost is ≤ limit.
func balance(cost []int64, limit int64) []int {
	count := func(capacity int64) []int {
		var sizes []int
		var sum int64
		n := 0
		for _, c := range cost {
			if n > 0 && sum+c > capacity {
				sizes = append(sizes, n)
				sum, n = 0, 0
			}
			sum += c
			n++
		}
		return append(sizes, n)
	}
	k := len(count(limit))
	lo, hi := slices.Max(cost), limit // the smallest capacity giving k runs lies in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		if len(count(mid)) <= k {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return count(lo)
}

func checkConfig(c *model.Config) error {
	switch {
	case c.Layers <= 0 || c.Layers > 1<<16:
		return fmt.Errorf("layers = %d, want 1…%d", c.Layers, 1<<16)
	case len(c.LayerKinds) != c.Layers:
		return fmt.Errorf("%d layer kinds for %d layers", len(c.LayerKinds), c.Layers)
	case c.VocabSize <= 0 || c.Hidden <= 0:
		return fmt.Errorf("vocab %d, hidden %d: both must be positive", c.VocabSize, c.Hidden)
	}
	for i, k := range c.LayerKinds {
		switch k {
		case model.Attention:
			if c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 {
				return fmt.Errorf("layer %d is attention but heads %d, kv heads %d, head dim %d", i, c.Heads, c.KVHeads, c.HeadDim)
			}
			if r := ropeDim(c); r%2 != 0 || r > c.HeadDim {
				return fmt.Errorf("rotary dims %d: want an even number ≤ head dim %d", r, c.HeadDim)
			}
		case model.DeltaNet:
			if c.ConvKernel < 2 || c.SSMKeyHeads <= 0 || c.SSMValueHeads <= 0 || c.SSMKeyDim <= 0 || c.SSMValueDim <= 0 {
				return fmt.Errorf("layer %d is deltanet but conv kernel %d, key heads %d, value heads %d, key dim %d, value dim %d",
					i, c.ConvKernel, c.SSMKeyHeads, c.SSMValueHeads, c.SSMKeyDim, c.SSMValueDim)
			}
		default:
			return fmt.Errorf("layer %d: unknown layer kind %d", i, k)
		}
	}
	return nil
}

func ropeDim(c *model.Config) int {
	if c.RopeDim > 0 {
		return c.RopeDim
	}
	return c.HeadDim
}

func modelInfo(c *model.Config, name string) ModelInfo {
	m := ModelInfo{
		Name: name, Arch: string(c.Arch), Layers: c.Layers, Hidden: c.Hidden, FFN: c.FFN,
		Vocab: c.VocabSize, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		RotaryDim: ropeDim(c), ContextLength: c.ContextLength,
		RopeScaling: string(c.RopeScaling.Type),
	}
	for _, k := range c.LayerKinds {
		m.LayerKinds = append(m.LayerKinds, k.String())
	}
	if c.Hybrid() {
		m.ConvKernel, m.ConvDim = c.ConvKernel, c.ConvDim()
		m.SSMValueHeads, m.SSMKeyDim, m.SSMValueDim = c.SSMValueHeads, c.SSMKeyDim, c.SSMValueDim
	}
	return m
}
