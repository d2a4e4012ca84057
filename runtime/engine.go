package runtime

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"

	"github.com/qnnprep/qnnprep/int8"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quant1bit"
	"github.com/qnnprep/qnnprep/runtime/kernels"
)

// DefaultBatch is the prompt batch when Options.Batch is 0. The prompt
// products repack each weight panel once per batch, so a larger batch reads
// and packs the weights fewer times per token: on the 700M model at 1
// thread (Intel Xeon, AVX-512) 128 took F16 prompts 1.24-1.32x and Q8_0
// 1.22-1.26x as fast as 32 (64 and 256 tokens), Q1_0 the same; 256 was no
// faster. Its activations (a few MB on an 8B model) are held only for
// prompts that long.
const DefaultBatch = 128

// Options configure an Engine.
type Options struct {
	// Threads is the number of goroutines a matrix product is split over
	// (by output rows). 0 means 2. Results do not depend on it.
	Threads int
	// Context is the largest number of positions a State holds. 0 means
	// the model's context length (Config.ContextLength).
	Context int
	// Batch is how many prompt tokens Forward processes together. 0 means
	// DefaultBatch. Results do not depend on it.
	Batch int
	// KVF16 computes attention the way llama.cpp's CPU backend does with
	// its default context settings (F16 KV cache, flash attention on):
	// cached K and V and the query are rounded to binary16, and each
	// (token, head) is one pass over the cache slots with an online
	// softmax whose running output is held in binary16. Off, attention is
	// float32 with an exact two-pass softmax. Use it to compare with
	// llama.cpp (measured against node-llama-cpp's v0.4.0 build: on
	// stories260K Q8_0 teacher-forced logits agree to ~2e-6 at most
	// positions instead of ~0.2; on 27 synthetic llama/qwen3/qwen35 GGUFs
	// with Q8_0 or Q1_0 weights, 100 greedy ids matched in 21 cases with
	// KVF16 and in 11 without). The rest of the gap is llama.cpp's own
	// batch-dependent arithmetic (its prompt matmuls take other kernels).
	KVF16 bool
}

// Engine runs a model on the CPU. It keeps the weights in their stored
// types where the model holds them (zero-copy for a GGUF file: its memory
// map; see mapWeights) and is safe for concurrent use by several States.
type Engine struct {
	cfg     model.Config
	name    string
	threads int
	ctxLen  int
	batch   int
	kvF16   bool
	// minWork is the smallest job (about multiply-adds) worth splitting
	// over goroutines; tests lower it to exercise the parallel paths.
	minWork int
	pool    *pool // helper goroutines when threads > 1

	embd    *matrix // token_embd: rows = vocab
	outNorm []float32
	out     *matrix // output, or token_embd when tied
	layers  []layer
	rope    *model.Rope // the RoPE tables, scaling included, as ggml's rope cache

	// l2 normalisation epsilon for GDN q and k (HF form, see doc.go).
	l2Eps float32
}

// layer holds one decoder block's weights.
type layer struct {
	kind     model.LayerKind
	attnNorm []float32
	ffnNorm  []float32 // ffn_norm, or post_attention_norm on hybrids

	// attention
	wq, wk, wv, wo *matrix
	bq, bk, bv     []float32
	qNorm, kNorm   []float32

	// Gated DeltaNet
	wqkv, wz      *matrix   // attn_qkv and attn_gate
	wqkvz         *matrix   // legacy qwen3next ssm_in (grouped q|k|v|z per key head)
	wba           *matrix   // qwen3next ssm_ba (grouped b|a per key head)
	wbeta, walpha *matrix   // qwen35 ssm_beta / ssm_alpha
	conv          []float32 // ssm_conv1d taps, tap-major: [tap][channel]
	ssmA, ssmDt   []float32
	ssmNorm       []float32
	wssmOut       *matrix

	// SwiGLU MLP
	wgate, wup, wdown *matrix
}

// New prepares m for decoding. The Engine reads the model's tensors
// lazily-mapped as they are; m must stay open while the Engine is used.
func New(m *model.Model, opt Options) (*Engine, error) {
	if m == nil {
		return nil, errors.New("runtime: nil model")
	}
	e := &Engine{cfg: m.Config, name: m.Path, threads: opt.Threads, ctxLen: opt.Context, batch: opt.Batch, kvF16: opt.KVF16, minWork: 1 << 15, l2Eps: 1e-6}
	if e.name == "" {
		e.name = "model"
	}
	if e.threads <= 0 {
		e.threads = 2
	}
	if e.batch <= 0 {
		e.batch = DefaultBatch
	}
	if e.ctxLen <= 0 {
		e.ctxLen = e.cfg.ContextLength
	}
	if err := e.checkConfig(); err != nil {
		return nil, err
	}
	if err := e.load(m); err != nil {
		return nil, err
	}
	e.mapWeights()
	if e.threads > 1 {
		// The helpers hold the pool, not the engine, so an engine that is
		// no longer used is collected and its cleanup ends them.
		e.pool = newPool(e.threads - 1)
		goruntime.AddCleanup(e, func(p *pool) { p.close() }, e.pool)
	}
	return e, nil
}

// runsWith reports whether an Engine made with opt would decode exactly
// as e does.
func (e *Engine) runsWith(opt Options) bool {
	o := Options{Threads: e.threads, Context: e.ctxLen, Batch: e.batch, KVF16: e.kvF16}
	if opt.Threads <= 0 {
		opt.Threads = 2
	}
	if opt.Context <= 0 {
		opt.Context = e.cfg.ContextLength
	}
	if opt.Batch <= 0 {
		opt.Batch = DefaultBatch
	}
	return opt == o
}

// Config returns the model's hyper-parameters.
func (e *Engine) Config() model.Config { return e.cfg }

// ContextLength is the number of positions a State can hold.
func (e *Engine) ContextLength() int { return e.ctxLen }

// VocabSize is the length of a logits vector.
func (e *Engine) VocabSize() int { return e.cfg.VocabSize }

// Hidden is the width of a hidden state.
func (e *Engine) Hidden() int { return e.cfg.Hidden }

// Layers is the number of decoder layers.
func (e *Engine) Layers() int { return len(e.layers) }

func (e *Engine) errorf(format string, args ...any) error {
	return fmt.Errorf("runtime: %s: %s", e.name, fmt.Sprintf(format, args...))
}

func (e *Engine) checkConfig() error {
	c := &e.cfg
	if _, ok := model.Lookup(c.Arch); !ok {
		var names []string
		for _, a := range model.Architectures() {
			names = append(names, string(a.Name()))
		}
		return e.errorf("architecture %q is not supported (%s)", c.Arch, strings.Join(names, ", "))
	}
	pos := func(name string, v int) error {
		if v <= 0 {
			return e.errorf("config %s = %d, want > 0", name, v)
		}
		return nil
	}
	for _, f := range []struct {
		n string
		v int
	}{{"vocab_size", c.VocabSize}, {"hidden", c.Hidden}, {"layers", c.Layers}, {"ffn", c.FFN}, {"context", e.ctxLen}} {
		if err := pos(f.n, f.v); err != nil {
			return err
		}
	}
	if len(c.LayerKinds) != c.Layers {
		return e.errorf("config has %d layer kinds for %d layers", len(c.LayerKinds), c.Layers)
	}
	hasAttn := false
	for _, k := range c.LayerKinds {
		switch k {
		case model.Attention:
			hasAttn = true
		case model.DeltaNet:
		default:
			return e.errorf("unknown layer kind %d", k)
		}
	}
	if hasAttn {
		for _, f := range []struct {
			n string
			v int
		}{{"heads", c.Heads}, {"kv_heads", c.KVHeads}, {"head_dim", c.HeadDim}} {
			if err := pos(f.n, f.v); err != nil {
				return err
			}
		}
		if c.Heads%c.KVHeads != 0 {
			return e.errorf("config heads %d is not a multiple of kv_heads %d", c.Heads, c.KVHeads)
		}
		if c.RopeDim < 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
			return e.errorf("config rope_dim %d invalid for head_dim %d", c.RopeDim, c.HeadDim)
		}
		if c.RopeFreqFactors != nil && len(c.RopeFreqFactors) != c.RopeDim/2 {
			return e.errorf("config has %d rope frequency factors, want rope_dim/2 = %d", len(c.RopeFreqFactors), c.RopeDim/2)
		}
		if c.RopeDim > 0 && !(c.RopeTheta > 0) {
			return e.errorf("config rope_theta %g, want > 0", c.RopeTheta)
		}
	}
	if c.Hybrid() {
		for _, f := range []struct {
			n string
			v int
		}{{"conv_kernel", c.ConvKernel}, {"ssm_key_heads", c.SSMKeyHeads}, {"ssm_value_heads", c.SSMValueHeads}, {"ssm_key_dim", c.SSMKeyDim}, {"ssm_value_dim", c.SSMValueDim}} {
			if err := pos(f.n, f.v); err != nil {
				return err
			}
		}
		if c.SSMValueHeads%c.SSMKeyHeads != 0 {
			return e.errorf("config ssm_value_heads %d is not a multiple of ssm_key_heads %d", c.SSMValueHeads, c.SSMKeyHeads)
		}
	}
	if !(c.RMSEps >= 0) {
		return e.errorf("config rms_eps %g invalid", c.RMSEps)
	}
	if c.RopeDim > 0 {
		r, err := c.Rope()
		if err != nil {
			return e.errorf("%v", err)
		}
		e.rope = r
	}
	return nil
}

// load binds every tensor the forward pass needs, checking its shape.
func (e *Engine) load(m *model.Model) error {
	c := &e.cfg
	var err error
	if e.embd, err = e.mat(m, "token_embd.weight", c.Hidden, c.VocabSize); err != nil {
		return err
	}
	if e.outNorm, err = e.vec(m, "output_norm.weight", c.Hidden); err != nil {
		return err
	}
	if m.Tensor("output.weight") != nil {
		if e.out, err = e.mat(m, "output.weight", c.Hidden, c.VocabSize); err != nil {
			return err
		}
	} else {
		e.out = e.embd
	}
	e.layers = make([]layer, c.Layers)
	for i := range e.layers {
		if err := e.loadLayer(m, i, &e.layers[i]); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) loadLayer(m *model.Model, i int, l *layer) error {
	c := &e.cfg
	p := fmt.Sprintf("blk.%d.", i)
	var err error
	l.kind = c.LayerKinds[i]
	if l.attnNorm, err = e.vec(m, p+"attn_norm.weight", c.Hidden); err != nil {
		return err
	}
	ffnNorm := p + "ffn_norm.weight"
	if m.Tensor(ffnNorm) == nil && m.Tensor(p+"post_attention_norm.weight") != nil {
		ffnNorm = p + "post_attention_norm.weight"
	}
	if l.ffnNorm, err = e.vec(m, ffnNorm, c.Hidden); err != nil {
		return err
	}
	if l.wgate, err = e.mat(m, p+"ffn_gate.weight", c.Hidden, c.FFN); err != nil {
		return err
	}
	if l.wup, err = e.mat(m, p+"ffn_up.weight", c.Hidden, c.FFN); err != nil {
		return err
	}
	if l.wdown, err = e.mat(m, p+"ffn_down.weight", c.FFN, c.Hidden); err != nil {
		return err
	}
	if l.kind == model.DeltaNet {
		return e.loadDeltaNet(m, p, l)
	}
	qRows := c.Heads * c.HeadDim
	if c.AttnOutputGate {
		qRows *= 2
	}
	kvRows := c.KVHeads * c.HeadDim
	if l.wq, err = e.mat(m, p+"attn_q.weight", c.Hidden, qRows); err != nil {
		return err
	}
	if l.wk, err = e.mat(m, p+"attn_k.weight", c.Hidden, kvRows); err != nil {
		return err
	}
	if l.wv, err = e.mat(m, p+"attn_v.weight", c.Hidden, kvRows); err != nil {
		return err
	}
	if l.wo, err = e.mat(m, p+"attn_output.weight", c.Heads*c.HeadDim, c.Hidden); err != nil {
		return err
	}
	if c.QKVBias {
		if l.bq, err = e.vec(m, p+"attn_q.bias", qRows); err != nil {
			return err
		}
		if l.bk, err = e.vec(m, p+"attn_k.bias", kvRows); err != nil {
			return err
		}
		if l.bv, err = e.vec(m, p+"attn_v.bias", kvRows); err != nil {
			return err
		}
	}
	if c.QKNorm {
		if l.qNorm, err = e.vec(m, p+"attn_q_norm.weight", c.HeadDim); err != nil {
			return err
		}
		if l.kNorm, err = e.vec(m, p+"attn_k_norm.weight", c.HeadDim); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) loadDeltaNet(m *model.Model, p string, l *layer) error {
	c := &e.cfg
	keyDim, valueDim, hv := c.SSMKeyHeads*c.SSMKeyDim, c.SSMValueHeads*c.SSMValueDim, c.SSMValueHeads
	var err error
	if m.Tensor(p+"attn_qkv.weight") == nil && m.Tensor(p+"ssm_in.weight") != nil {
		if l.wqkvz, err = e.mat(m, p+"ssm_in.weight", c.Hidden, 2*keyDim+2*valueDim); err != nil {
			return err
		}
	} else {
		if l.wqkv, err = e.mat(m, p+"attn_qkv.weight", c.Hidden, c.ConvDim()); err != nil {
			return err
		}
		if l.wz, err = e.mat(m, p+"attn_gate.weight", c.Hidden, valueDim); err != nil {
			return err
		}
	}
	if m.Tensor(p+"ssm_beta.weight") == nil && m.Tensor(p+"ssm_ba.weight") != nil {
		if l.wba, err = e.mat(m, p+"ssm_ba.weight", c.Hidden, 2*hv); err != nil {
			return err
		}
	} else {
		if l.wbeta, err = e.mat(m, p+"ssm_beta.weight", c.Hidden, hv); err != nil {
			return err
		}
		if l.walpha, err = e.mat(m, p+"ssm_alpha.weight", c.Hidden, hv); err != nil {
			return err
		}
	}
	conv, err := e.vec(m, p+"ssm_conv1d.weight", c.ConvKernel*c.ConvDim())
	if err != nil {
		return err
	}
	l.conv = tapMajor(conv, c.ConvKernel)
	if l.ssmA, err = e.vec(m, p+"ssm_a", hv); err != nil {
		return err
	}
	if l.ssmDt, err = e.vec(m, p+"ssm_dt.bias", hv); err != nil {
		return err
	}
	if l.ssmNorm, err = e.vec(m, p+"ssm_norm.weight", c.SSMValueDim); err != nil {
		return err
	}
	if l.wssmOut, err = e.mat(m, p+"ssm_out.weight", valueDim, c.Hidden); err != nil {
		return err
	}
	return nil
}

// mat binds a 2-D weight {cols, rows} in its stored type.
func (e *Engine) mat(m *model.Model, name string, cols, rows int) (*matrix, error) {
	t := m.Tensor(name)
	if t == nil {
		return nil, e.errorf("missing tensor %q", name)
	}
	if len(t.Dims) != 2 || t.Dims[0] != int64(cols) || t.Dims[1] != int64(rows) {
		return nil, e.errorf("tensor %q has dims %v, want [%d %d]", name, t.Dims, cols, rows)
	}
	data, err := t.Data()
	if err != nil {
		return nil, fmt.Errorf("runtime: %s: tensor %q: %w", e.name, name, err)
	}
	mt, err := newMatrix(name, t.Type, cols, rows, data)
	if err != nil {
		return nil, fmt.Errorf("runtime: %s: %w", e.name, err)
	}
	return mt, nil
}

// vec reads a small tensor (norm, bias, gate parameters) as float32.
func (e *Engine) vec(m *model.Model, name string, n int) ([]float32, error) {
	t := m.Tensor(name)
	if t == nil {
		return nil, e.errorf("missing tensor %q", name)
	}
	if t.Elements() != int64(n) {
		return nil, e.errorf("tensor %q has %d elements (dims %v), want %d", name, t.Elements(), t.Dims, n)
	}
	v, err := t.Float32()
	if err != nil {
		return nil, fmt.Errorf("runtime: %s: tensor %q: %w", e.name, name, err)
	}
	if len(v) != n {
		return nil, e.errorf("tensor %q decoded to %d values, want %d", name, len(v), n)
	}
	return v, nil
}

// KernelSet names the instruction sets of the kernels decoding runs on
// here: one name ("avx512", "avx2", "go") when the packages agree, else each
// package's.
func KernelSet() string {
	sets := []struct{ pkg, set string }{{"int8", int8.KernelSet()}, {"quant1bit", quant1bit.KernelSet()}, {"kernels", kernels.KernelSet()}}
	var parts []string
	for _, s := range sets {
		if s.set != sets[0].set {
			for _, s := range sets {
				parts = append(parts, s.pkg+" "+s.set)
			}
			return strings.Join(parts, ", ")
		}
	}
	return sets[0].set
}
