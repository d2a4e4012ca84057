package model

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
)

// mdReader reads {arch}.* keys and collects what is wrong with them.
type mdReader struct {
	md   gguf.Metadata
	errs []string
}

// get returns key's value; a required key that is absent is an error.
func (r *mdReader) get(key string, required bool) (any, bool) {
	v, ok := r.md.Get(key)
	if !ok && required {
		r.errs = append(r.errs, "missing key "+key)
	}
	return v, ok
}

func (r *mdReader) int(key string, def int, required bool) int {
	v, ok := r.get(key, required)
	if !ok {
		return def
	}
	n, ok := r.md.Int(key)
	if !ok {
		r.errs = append(r.errs, fmt.Sprintf("key %s: want an integer, got %T", key, v))
		return def
	}
	if n < 0 {
		r.errs = append(r.errs, fmt.Sprintf("key %s = %d is negative", key, n))
		return def
	}
	if n > math.MaxInt32 {
		r.errs = append(r.errs, fmt.Sprintf("key %s = %d is too large (at most %d)", key, n, math.MaxInt32))
		return def
	}
	return int(n)
}

func (r *mdReader) float(key string, def float64, required bool) float64 {
	v, ok := r.get(key, required)
	if !ok {
		return def
	}
	f, ok := r.md.Float(key)
	if !ok {
		r.errs = append(r.errs, fmt.Sprintf("key %s: want a number, got %T", key, v))
		return def
	}
	return f
}

// setRopeScaling writes s as llama.cpp's converter does: type and factor
// for linear; for yarn also the original context and the yarn_* values
// the source gave; nothing for llama3, whose factors are the
// rope_freqs.weight tensor.
func setRopeScaling(md *gguf.Metadata, p string, s RopeScaling) {
	switch s.Type {
	case RopeLinear, RopeYarn:
		md.Set(p+"rope.scaling.type", string(s.Type))
		md.Set(p+"rope.scaling.factor", s.Factor)
	}
	if s.Type == RopeYarn {
		if s.OrigContext > 0 {
			md.Set(p+"rope.scaling.original_context_length", uint32(s.OrigContext))
		}
		for _, kv := range []struct {
			key string
			v   *float32
		}{
			{"yarn_ext_factor", s.YarnExtFactor},
			{"yarn_attn_factor", s.YarnAttnFactor},
			{"yarn_beta_fast", s.YarnBetaFast},
			{"yarn_beta_slow", s.YarnBetaSlow},
		} {
			if kv.v != nil {
				md.Set(p+"rope.scaling."+kv.key, *kv.v)
			}
		}
	}
	if s.AttnFactor != 0 {
		md.Set(p+"rope.scaling.attn_factor", s.AttnFactor)
	}
}

// ropeScaling reads the {arch}.rope.scaling.* keys as llama.cpp does: a
// missing type is linear (with no factor, no scaling), "none" ignores the
// factor, and the old rope.scale_linear key stands in for the factor.
func (r *mdReader) ropeScaling(p string) RopeScaling {
	var s RopeScaling
	typ := "linear"
	if v, ok := r.md.Get(p + "rope.scaling.type"); ok {
		if typ, ok = v.(string); !ok {
			r.errs = append(r.errs, fmt.Sprintf("key %srope.scaling.type: want a string, got %T", p, v))
			return s
		}
	}
	factor := r.float(p+"rope.scaling.factor", 0, false)
	if _, ok := r.md.Get(p + "rope.scaling.factor"); !ok {
		factor = r.float(p+"rope.scale_linear", 0, false)
	}
	s.AttnFactor = float32(r.float(p+"rope.scaling.attn_factor", 0, false))
	switch typ {
	case "none":
		return s
	case "linear":
		if factor == 0 || factor == 1 {
			return s // freq_scale 1: no scaling
		}
		s.Type = RopeLinear
	case "yarn":
		s.Type = RopeYarn
		s.OrigContext = r.int(p+"rope.scaling.original_context_length", 0, false)
		opt := func(key string) *float32 {
			if _, ok := r.md.Get(p + key); !ok {
				return nil
			}
			v := float32(r.float(p+key, 0, false))
			return &v
		}
		s.YarnExtFactor = opt("rope.scaling.yarn_ext_factor")
		s.YarnAttnFactor = opt("rope.scaling.yarn_attn_factor")
		s.YarnBetaFast = opt("rope.scaling.yarn_beta_fast")
		s.YarnBetaSlow = opt("rope.scaling.yarn_beta_slow")
	default:
		// longrope needs rope_long/rope_short tensors no supported
		// architecture has; anything else llama.cpp refuses too.
		r.errs = append(r.errs, fmt.Sprintf("key %srope.scaling.type = %q: unsupported rope scaling type (want none, linear or yarn)", p, typ))
		return s
	}
	if v, ok := r.md.Get(p + "rope.scaling.yarn_log_multiplier"); ok {
		r.errs = append(r.errs, fmt.Sprintf("key %srope.scaling.yarn_log_multiplier = %v: unsupported (DeepSeek's YaRN variant)", p, v))
	}
	s.Factor = float32(factor)
	return s
}

// tokenID reads an optional token id; absent or out of range is -1 (the
// llama2.c converter writes 0xFFFFFFFF for "none").
func tokenID(md gguf.Metadata, key string) int {
	n, ok := md.Int(key)
	if !ok || n < 0 || n > math.MaxInt32 {
		return -1
	}
	return int(n)
}

// ConfigFromGGUF reads a Config from GGUF metadata: general.architecture,
// the {arch}.* hyper-parameter keys as llama.cpp reads them, and
// tokenizer.ggml.{bos,eos}_token_id and the token count for BOS, EOS and
// (without {arch}.vocab_size) VocabSize.
//
// Three fields depend on the tensors, not the metadata, and are set by
// Open: TiedEmbeddings (no output.weight), QKVBias (attn_q.bias present;
// ConfigFromGGUF assumes true for qwen2 only) and RopeFreqFactors
// (rope_freqs.weight).
func ConfigFromGGUF(md gguf.Metadata) (Config, error) {
	archName, ok := md.String("general.architecture")
	if !ok {
		return Config{}, errors.New("missing key general.architecture")
	}
	a, ok := Lookup(Arch(archName))
	if !ok {
		if strings.Contains(archName, "moe") {
			return Config{}, fmt.Errorf("unsupported: mixture-of-experts (architecture %s; supported: %s)", archName, supportedList())
		}
		return Config{}, fmt.Errorf("unsupported architecture %s (supported: %s)", archName, supportedList())
	}
	p := archName + "."
	r := &mdReader{md: md}
	if n := r.int(p+"expert_count", 0, false); n > 0 {
		return Config{}, fmt.Errorf("unsupported: mixture-of-experts (%sexpert_count = %d)", p, n)
	}
	f := a.Features()
	c := Config{Arch: a.Name()}
	c.Hidden = r.int(p+"embedding_length", 0, true)
	blocks := r.int(p+"block_count", 0, true)
	nextn := r.int(p+"nextn_predict_layers", 0, false)
	c.Layers = blocks - nextn
	c.FFN = r.int(p+"feed_forward_length", 0, true)
	c.Heads = r.int(p+"attention.head_count", 0, true)
	c.KVHeads = r.int(p+"attention.head_count_kv", c.Heads, false)
	defHead := 0
	if c.Heads > 0 {
		defHead = c.Hidden / c.Heads
	}
	c.HeadDim = r.int(p+"attention.key_length", defHead, false)
	if v := r.int(p+"attention.value_length", c.HeadDim, false); v != c.HeadDim {
		r.errs = append(r.errs, fmt.Sprintf("%sattention.value_length %d differs from key_length %d (not supported)", p, v, c.HeadDim))
	}
	c.ContextLength = r.int(p+"context_length", 0, true)
	c.RMSEps = float32(r.float(p+"attention.layer_norm_rms_epsilon", 0, true))
	c.RopeTheta = float64(float32(r.float(p+"rope.freq_base", 10000, false)))
	c.RopeDim = r.int(p+"rope.dimension_count", c.HeadDim, false)
	c.RopeScaling = r.ropeScaling(p)
	if _, ok := md.Get(p + "vocab_size"); ok {
		c.VocabSize = r.int(p+"vocab_size", 0, true)
	} else if toks, ok := md.Strings("tokenizer.ggml.tokens"); ok {
		c.VocabSize = len(toks)
	} else {
		r.errs = append(r.errs, "missing key "+p+"vocab_size (and no tokenizer.ggml.tokens)")
	}
	c.BOS = tokenID(md, "tokenizer.ggml.bos_token_id")
	c.EOS = tokenID(md, "tokenizer.ggml.eos_token_id")
	if len(r.errs) == 0 {
		if err := c.CheckVocab(md); err != nil {
			r.errs = append(r.errs, err.Error())
		}
	}

	c.RopeNeox = !f.NormRope // qwen35's IMROPE is NEOX for text
	c.QKVBias = f.QKVBias
	c.QKNorm = f.QKNorm
	c.AttnOutputGate = f.GatedAttention
	if len(r.errs) == 0 && (c.Layers < 1 || c.Layers > maxLayers) {
		r.errs = append(r.errs, fmt.Sprintf("%d layers (block_count %d - nextn_predict_layers %d), want 1..%d", c.Layers, blocks, nextn, maxLayers))
	}
	if len(r.errs) > 0 {
		return Config{}, errors.New(strings.Join(r.errs, "; "))
	}
	c.LayerKinds = make([]LayerKind, c.Layers)
	if f.DeltaNet {
		c.ConvKernel = r.int(p+"ssm.conv_kernel", 0, true)
		c.SSMKeyDim = r.int(p+"ssm.state_size", 0, true)
		c.SSMKeyHeads = r.int(p+"ssm.group_count", 0, true)
		c.SSMValueHeads = r.int(p+"ssm.time_step_rank", 0, true)
		inner := r.int(p+"ssm.inner_size", 0, true)
		if c.SSMValueHeads > 0 && inner%c.SSMValueHeads == 0 {
			c.SSMValueDim = inner / c.SSMValueHeads
		} else if len(r.errs) == 0 {
			r.errs = append(r.errs, fmt.Sprintf("%sssm.inner_size %d not a multiple of ssm.time_step_rank %d", p, inner, c.SSMValueHeads))
		}
		c.SSMTiledHeads = f.TiledValueHeads
		if v, ok := md.Get(p + "attention.recurrent_layers"); ok {
			rec, ok := v.([]bool)
			if !ok || len(rec) < c.Layers {
				r.errs = append(r.errs, fmt.Sprintf("key %sattention.recurrent_layers: want %d bools", p, blocks))
			} else {
				for i := range c.LayerKinds {
					if rec[i] {
						c.LayerKinds[i] = DeltaNet
					}
				}
			}
		} else {
			interval := r.int(p+"full_attention_interval", 4, false)
			if interval < 1 {
				r.errs = append(r.errs, fmt.Sprintf("%sfull_attention_interval = %d", p, interval))
				interval = 1
			}
			for i := range c.LayerKinds {
				if (i+1)%interval != 0 {
					c.LayerKinds[i] = DeltaNet
				}
			}
		}
	}
	a.parseGGUF(r, p, &c)
	if len(r.errs) > 0 {
		return Config{}, errors.New(strings.Join(r.errs, "; "))
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// interval returns n when the layer kinds are exactly "every n-th layer
// is attention" (llama.cpp's full_attention_interval), else 0.
func (c *Config) interval() int {
	n := 0
	for i, k := range c.LayerKinds {
		if k == Attention {
			n = i + 1
			break
		}
	}
	if n == 0 {
		return 0
	}
	for i, k := range c.LayerKinds {
		if (k == DeltaNet) != ((i+1)%n != 0) {
			return 0
		}
	}
	return n
}

// GGUFMetadata returns general.architecture, general.name and the
// {arch}.* keys llama.cpp reads to load this model, in llama.cpp's types
// (uint32 counts, float32 eps and rope base). Tokenizer keys are not
// included.
func (m *Model) GGUFMetadata() gguf.Metadata {
	c := &m.Config
	p := string(c.Arch) + "."
	name := m.name
	if name == "" {
		name = string(c.Arch)
	}
	var md gguf.Metadata
	u := func(key string, v int) { md.Set(p+key, uint32(v)) }
	md.Set("general.architecture", string(c.Arch))
	md.Set("general.name", name)
	u("vocab_size", c.VocabSize)
	u("context_length", c.ContextLength)
	u("embedding_length", c.Hidden)
	u("block_count", c.Layers)
	u("feed_forward_length", c.FFN)
	u("attention.head_count", c.Heads)
	u("attention.head_count_kv", c.KVHeads)
	u("attention.key_length", c.HeadDim)
	u("attention.value_length", c.HeadDim)
	md.Set(p+"attention.layer_norm_rms_epsilon", c.RMSEps)
	md.Set(p+"rope.freq_base", float32(c.RopeTheta))
	u("rope.dimension_count", c.RopeDim)
	setRopeScaling(&md, p, c.RopeScaling)
	a, ok := Lookup(c.Arch)
	if !ok {
		return md // an unsupported Config (New and Open refuse one)
	}
	if a.Features().DeltaNet {
		u("ssm.conv_kernel", c.ConvKernel)
		u("ssm.state_size", c.SSMKeyDim)
		u("ssm.group_count", c.SSMKeyHeads)
		u("ssm.time_step_rank", c.SSMValueHeads)
		u("ssm.inner_size", c.SSMValueHeads*c.SSMValueDim)
		if n := c.interval(); n > 0 {
			u("full_attention_interval", n)
		} else {
			rec := make([]bool, len(c.LayerKinds))
			for i, k := range c.LayerKinds {
				rec[i] = k == DeltaNet
			}
			md.Set(p+"attention.recurrent_layers", rec)
		}
	}
	a.writeGGUF(c, &md, p)
	return md
}

func openGGUF(path string) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m, err := fromGGUF(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// fromGGUF builds the canonical model over an open GGUF file.
func fromGGUF(f *gguf.File) (*Model, error) {
	md := f.Metadata
	// Older files carry no {arch}.vocab_size and some no token list; the
	// embedding then says it.
	if arch, ok := md.String("general.architecture"); ok {
		_, hasVocab := md.Get(arch + ".vocab_size")
		_, hasToks := md.Get("tokenizer.ggml.tokens")
		if te, ok := f.Tensor("token_embd.weight"); ok && !hasVocab && !hasToks && len(te.Dims) == 2 {
			md = slices.Clone(md)
			md.Set(arch+".vocab_size", uint32(min(te.Dims[1], math.MaxUint32)))
		}
	}
	cfg, err := ConfigFromGGUF(md)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", f.Path, err)
	}
	_, hasOutput := f.Tensor("output.weight")
	cfg.TiedEmbeddings = !hasOutput
	for i, k := range cfg.LayerKinds {
		if k == Attention {
			_, cfg.QKVBias = f.Tensor(blk(i, "attn_q.bias"))
			break
		}
	}
	var problems []string
	skip := map[string]bool{}
	if ti, ok := f.Tensor("rope_freqs.weight"); ok {
		if want := []int64{int64(cfg.RopeDim / 2)}; !slices.Equal(ti.Dims, want) {
			problems = append(problems, fmt.Sprintf("rope_freqs.weight has shape %v, expected %v", ti.Dims, want))
			skip[ti.Name] = true
		} else {
			v, err := ggufTensor(f, ti).Float32()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Path, err)
			}
			if cfg.RopeScaling.Type != RopeNoScaling {
				return nil, fmt.Errorf("model: %s: rope_freqs.weight (Llama 3 rope scaling) with %s.rope.scaling.type %s", f.Path, cfg.Arch, cfg.RopeScaling.Type)
			}
			cfg.RopeFreqFactors = v
			// The file holds only the factors; Genie wants the
			// parameters they were made from.
			cfg.RopeScaling = recoverLlama3(v, cfg.RopeTheta, cfg.RopeDim)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("model: %s: %w", f.Path, err)
	}

	byName := make(map[string]*Tensor, len(f.Tensors))
	mtpFrom, mtpTo := cfg.Layers, cfg.Layers
	if n, _ := f.Metadata.Int(string(cfg.Arch) + ".nextn_predict_layers"); n > 0 {
		mtpTo += int(n)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		// MTP blocks after the main stack are a draft head, not part of
		// this model (the Hugging Face side drops mtp.* likewise).
		if l, ok := blockIndex(ti.Name); ok && l >= mtpFrom && l < mtpTo || skip[ti.Name] {
			continue
		}
		byName[ti.Name] = ggufTensor(f, ti)
	}
	a, _ := Lookup(cfg.Arch)
	problems = a.fromGGUF(&cfg, byName, skip, problems)
	ordered, problems := arrange(cfg, byName, skip, problems)
	if err := problemError(f.Path, problems); err != nil {
		return nil, err
	}
	name, _ := f.Metadata.String("general.name")
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))
	}
	m := &Model{
		Path: f.Path, Format: "gguf", Config: cfg, Tensors: ordered,
		Metadata: f.Metadata, name: name, close: f.Close,
	}
	m.index()
	return m, nil
}

func ggufTensor(f *gguf.File, ti *gguf.TensorInfo) *Tensor {
	return &Tensor{
		Name: ti.Name, Dims: slices.Clone(ti.Dims), Type: ti.Type,
		mapped: true,
		load:   func() ([]byte, error) { return f.Data(ti) },
	}
}

// blockIndex parses the N of "blk.N.…".
func blockIndex(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num {
		return 0, false
	}
	return n, true
}

// split is one output of splitRows: a name, its row count and the source
// rows it takes (computed only once the source shape is known good).
type split struct {
	name string
	n    int64
	rows func() []int
}

// splitRows adds to byName one lazy tensor per split, each made of some
// rows of src, after checking src has the dims want. If it has not, the
// problem is reported against src and the outputs are not reported
// missing.
func splitRows(src *Tensor, want []int64, outs []split, byName map[string]*Tensor, skip map[string]bool, problems []string) []string {
	bad := func(msg string) []string {
		for _, o := range outs {
			skip[o.name] = true
		}
		return append(problems, msg)
	}
	if src.bad != "" {
		return bad(fmt.Sprintf("%s: %s", src.where(), src.bad))
	}
	if !slices.Equal(src.Dims, want) {
		return bad(fmt.Sprintf("%s has shape %v, expected %v", src.where(), src.Dims, want))
	}
	rowBytes, err := src.Type.RowBytes(src.Dims[0])
	if err != nil {
		return bad(fmt.Sprintf("%s: %v", src.where(), err))
	}
	for _, o := range outs {
		if old := byName[o.name]; old != nil {
			problems = append(problems, fmt.Sprintf("duplicate tensor %s (from %s and %s)", o.name, old.where(), src.where()))
			continue
		}
		byName[o.name] = &Tensor{
			Name: o.name, Dims: []int64{src.Dims[0], o.n}, Type: src.Type, src: src.where(), from: src,
			load: func() ([]byte, error) {
				b, err := src.Data()
				if err != nil {
					return nil, err
				}
				rows := o.rows()
				nsrc := len(b) / int(rowBytes)
				for _, r := range rows {
					if r < 0 || r >= nsrc {
						return nil, fmt.Errorf("internal: row %d of %d", r, nsrc)
					}
				}
				return gatherRows(b, int(rowBytes), rows), nil
			},
		}
	}
	return problems
}
