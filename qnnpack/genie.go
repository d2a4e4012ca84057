package qnnpack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// ordered is a JSON object that keeps its key order, so genie_config.json
// reads like Genie's examples and is byte-identical run to run.
type ordered []field

type field struct {
	K string
	V any
}

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.K)
		v, err := json.Marshal(f.V)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.K, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// EngineModel is one model a Genie engine runs: its plan, its
// hyper-parameters and its context binaries as bundle-relative paths in
// stage order.
type EngineModel struct {
	Plan    *shard.Plan
	Config  model.Config
	CtxBins []string
	// TokenMap is the eaglet draft's draft-token-map file (bundle-relative).
	TokenMap string
}

// EagletGenie is what an eaglet genie_config.json names beyond the engines:
// the embedding LUT (eaglet runs on embeddings) and its row size.
type EagletGenie struct {
	LUT      string // bundle-relative float32 [vocab][size] file
	LUTSize  int    // embedding row length (the target's hidden size)
	DraftLen int
}

// GenieOptions are the bundle-level settings of genie_config.json.
type GenieOptions struct {
	Target    EngineModel
	Draft     *EngineModel // the draft engine, for spd and eaglet
	Eaglet    *EagletGenie // eaglet only
	Tokenizer string       // bundle-relative path; "tokenizer.json" if empty
	// EOG are further ids that end generation (Target.Config.EOS always
	// does); with any, eos-token is the list, EOS first, as Genie stops at
	// each of them.
	EOG        []int32
	Extensions string // bundle-relative HTP extensions JSON; "htp_backend_ext_config.json" if empty
	NThreads   int    // engine n-threads; 0 means 3 (AI Hub's value)
	// LadeUpdateMode is lade's update-mode (the plan does not carry it);
	// "" means ALWAYS_FWD_ONE.
	LadeUpdateMode string
}

// GenieConfig builds genie_config.json for the plan's dialog and checks it
// against Genie's key lists (ValidateGenieConfig) before returning it.
//
// From the plan: dialog type and block, context.size, n-vocab, kv-dim
// (head_dim), rope-dim and the ctx-bins order; from the model config:
// bos/eos tokens and rope-theta. The QnnHtp block uses AI Hub's values
// (use-mmap true, spill-fill-bufsize 0, mmap-budget 0, poll true, cpu-mask
// 0xe0, allow-async-init false) and the sampler is greedy, which is what
// qnnprep's golden verification compares against.
func GenieConfig(o GenieOptions) ([]byte, error) {
	p := o.Target.Plan
	if p == nil {
		return nil, fmt.Errorf("qnnpack: genie config: no plan")
	}
	if o.Tokenizer == "" {
		o.Tokenizer = "tokenizer.json"
	}
	if o.Extensions == "" {
		o.Extensions = "htp_backend_ext_config.json"
	}
	if o.NThreads == 0 {
		o.NThreads = 3
	}
	cfg := &o.Target.Config
	if cfg.BOS < 0 || cfg.EOS < 0 {
		return nil, fmt.Errorf("qnnpack: genie config: model %s has no BOS (%d) or EOS (%d) token id; Genie needs both in context", p.Model.Name, cfg.BOS, cfg.EOS)
	}
	context := ordered{
		{"version", 1},
		{"bos-token", cfg.BOS},
		{"eos-token", eosTokens(cfg.EOS, o.EOG)},
		{"size", p.ContextSize},
		{"n-vocab", p.Model.Vocab},
	}
	if o.Draft != nil {
		context = append(context, field{"draft-n-vocab", o.Draft.Plan.Model.Vocab})
	}

	target, err := engine(&o.Target, o, "")
	if err != nil {
		return nil, err
	}
	var engines any = target
	d := p.Dialog
	switch d.Type {
	case shard.SPD:
		if o.Draft == nil || o.Draft.Plan == nil {
			return nil, fmt.Errorf("qnnpack: genie config: dialog spd needs a draft model (its plan and context binaries)")
		}
		draft, err := engine(o.Draft, o, "draft")
		if err != nil {
			return nil, err
		}
		target = append(target, field{"role", "target"})
		engines = []ordered{draft, target}
	case shard.Eaglet:
		switch {
		case o.Draft == nil || o.Draft.Plan == nil:
			return nil, fmt.Errorf("qnnpack: genie config: dialog eaglet needs the EAGLE-3 draft engine (its plan and context binaries)")
		case o.Eaglet == nil || o.Eaglet.LUT == "" || o.Draft.TokenMap == "":
			return nil, fmt.Errorf("qnnpack: genie config: dialog eaglet needs an embedding LUT and a draft-token-map")
		}
		draft, err := engine(o.Draft, o, "draft")
		if err != nil {
			return nil, err
		}
		target = append(target, field{"role", "target"})
		engines = []ordered{target, draft}
	default:
		if o.Draft != nil {
			return nil, fmt.Errorf("qnnpack: genie config: a draft model was given but dialog %s does not use one", d.Type)
		}
	}

	dialog := ordered{
		{"version", 1},
		{"type", string(d.Type)},
		{"context", context},
		{"sampler", ordered{{"version", 1}, {"seed", 42}, {"greedy", true}}},
		{"tokenizer", ordered{{"version", 1}, {"path", o.Tokenizer}}},
	}
	if d.Type == shard.Eaglet {
		// Eaglet takes embeddings: Genie turns tokens into rows with the LUT.
		dialog = append(dialog, field{"embedding", ordered{{"version", 1}, {"type", "lut"}, {"lut-path", o.Eaglet.LUT},
			{"size", o.Eaglet.LUTSize}, {"datatype", "float32"}}})
	}
	dialog = append(dialog, field{"engine", engines})
	switch d.Type {
	case shard.SSD:
		dialog = append(dialog, field{"ssd-q1", ordered{
			{"version", 1},
			{"ssd-version", 1},
			{"forecast-token-count", d.ForecastTokenCount},
			{"branches", d.Branches},
			{"forecast-prefix", d.ForecastPrefix},
			{"forecast-prefix-name", d.ForecastPrefixName},
		}})
	case shard.SPD:
		dialog = append(dialog, field{"spd", ordered{{"version", 1}, {"draft-len", d.DraftLen}}})
	case shard.Eaglet:
		// qnnprep's draft graphs keep their KV across tree levels.
		dialog = append(dialog, field{"eaglet", ordered{{"version", 1}, {"eaglet-version", 1}, {"draft-len", d.DraftLen},
			{"n-branches", d.NBranches}, {"max-tokens-target-can-evaluate", d.MaxTargetTokens}, {"draft-kv-cache", true}}})
	case shard.LADE:
		mode := o.LadeUpdateMode
		if mode == "" {
			mode = "ALWAYS_FWD_ONE"
		}
		dialog = append(dialog, field{"lade", ordered{{"version", 1}, {"update-mode", mode},
			{"window", d.Window}, {"ngram", d.NGram}, {"gcap", d.GCap}}})
	}
	b, err := json.MarshalIndent(ordered{{"dialog", dialog}}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("qnnpack: genie config: %w", err)
	}
	b = append(b, '\n')
	if err := ValidateGenieConfig(b); err != nil {
		return nil, fmt.Errorf("qnnpack: generated %w", err)
	}
	return b, nil
}

// engine is one dialog.engine object.
func engine(m *EngineModel, o GenieOptions, role string) (ordered, error) {
	p := m.Plan
	if len(m.CtxBins) != len(p.Stages) {
		return nil, fmt.Errorf("qnnpack: genie config: model %s has %d stages but %d context binaries", p.Model.Name, len(p.Stages), len(m.CtxBins))
	}
	htp := ordered{
		{"version", 1},
		{"spill-fill-bufsize", 0},
		{"use-mmap", true},
		{"mmap-budget", 0},
		{"poll", true},
		{"cpu-mask", "0xe0"},
		{"kv-dim", p.Model.HeadDim},
		{"allow-async-init", false},
	}
	var pos ordered
	switch p.Positional {
	case shard.Rope:
		if m.Config.RopeTheta <= 0 {
			return nil, fmt.Errorf("qnnpack: genie config: model %s uses RoPE but its rope theta is %g", p.Model.Name, m.Config.RopeTheta)
		}
		pos = ordered{{"type", "rope"}, {"rope-dim", p.RopeDim}, {"rope-theta", m.Config.RopeTheta}}
		rs, err := genieRopeScaling(&m.Config)
		if err != nil {
			return nil, fmt.Errorf("qnnpack: genie config: model %s: %w", p.Model.Name, err)
		}
		if rs != nil {
			pos = append(pos, field{"rope-scaling", rs})
		}
	case shard.Absolute:
		pos = ordered{{"type", "absolute"}}
	default:
		return nil, fmt.Errorf("qnnpack: genie config: unknown positional encoding %q", p.Positional)
	}
	e := ordered{{"version", 1}, {"n-threads", o.NThreads}}
	if role == "draft" {
		e = append(e, field{"role", role})
	}
	mod := ordered{
		{"version", 1},
		{"type", "binary"},
		{"binary", ordered{{"version", 1}, {"ctx-bins", m.CtxBins}}},
		{"positional-encoding", pos},
	}
	if m.TokenMap != "" {
		mod = append(mod, field{"draft-token-map", m.TokenMap})
	}
	e = append(e,
		field{"backend", ordered{
			{"version", 1},
			{"type", "QnnHtp"},
			{"QnnHtp", htp},
			{"extensions", o.Extensions},
		}},
		field{"model", mod},
	)
	return e, nil
}

// eosTokens is eos-token: EOS alone, or EOS followed by the other
// end-of-generation ids in increasing order.
func eosTokens(eos int, eog []int32) any {
	ids := []int{eos}
	for _, id := range eog {
		if int(id) != eos && !slices.Contains(ids, int(id)) {
			ids = append(ids, int(id))
		}
	}
	if len(ids) == 1 {
		return eos
	}
	slices.Sort(ids[1:])
	return ids
}

// genieRopeScaling is positional-encoding.rope-scaling for c, or nil
// without scaling. Genie computes the cos/sin tables itself and knows
// llama3 among the types qnnprep reads; a linear or yarn model needs
// absolute positions (shard rule GENIE-ROPE-SCALING), where the graphs
// hold the scaled tables.
func genieRopeScaling(c *model.Config) (ordered, error) {
	s := c.RopeScaling
	switch s.Type {
	case model.RopeNoScaling:
		if len(c.RopeFreqFactors) > 0 {
			return nil, errors.New("rope frequency factors without a rope scaling type")
		}
		return nil, nil
	case model.RopeLlama3:
		if s.LowFreqFactor == 0 || s.OrigContext == 0 {
			return nil, fmt.Errorf("its Llama 3 rope_freqs factors match no llama3 parameters (factor, low-freq-factor, high-freq-factor, original-max-position-embeddings) qnnprep could recover, and Genie needs them")
		}
		return ordered{
			{"rope-type", "llama3"},
			{"factor", float64(s.Factor)},
			{"low-freq-factor", float64(s.LowFreqFactor)},
			{"high-freq-factor", float64(s.HighFreqFactor)},
			{"original-max-position-embeddings", s.OrigContext},
		}, nil
	}
	return nil, fmt.Errorf("Genie's rope positional encoding cannot compute %s RoPE scaling (rope-type is llama3, default or longrope); plan with absolute positions (%s)", s.Type, shard.RuleRopeScaling)
}
