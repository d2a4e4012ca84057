package shard

import (
	"fmt"
	"slices"

	"github.com/qnnprep/qnnprep/gguf"
)

// DefaultMaxStageBytes is the largest context binary a stage may become:
// QNN refuses to serialize a graph past 2 GiB (qnn-genie.md §7.1).
const DefaultMaxStageBytes int64 = 2 << 30

// MinVTCMOneBit is the vtcm_mb a stage with 1-bit weights is given at least.
const MinVTCMOneBit = 8

// Positional is Genie's model.positional-encoding type.
type Positional string

const (
	// Rope feeds position_ids_cos/_sin [1,1,AR,rope-dim]; Genie computes
	// tree-aware positions for speculative dialogs only on this path.
	Rope Positional = "rope"
	// Absolute feeds position_ids [1,1,AR]; Genie fills it with n_past,
	// n_past+1, … regardless of any draft tree.
	Absolute Positional = "absolute"
)

// DialogType is Genie's dialog.type.
type DialogType string

const (
	Basic  DialogType = "basic"
	SSD    DialogType = "ssd-q1"
	SPD    DialogType = "spd"
	LADE   DialogType = "lade"
	Eaglet DialogType = "eaglet"
)

// Dialog is the Genie dialog the plan is built for, with Genie's own key
// names (qnn-genie.md §1.1). Only the fields of Type are used.
type Dialog struct {
	Type DialogType `json:"type"`

	// ssd-q1
	ForecastTokenCount int    `json:"forecast-token-count,omitempty"`
	Branches           []int  `json:"branches,omitempty"`
	ForecastPrefix     int    `json:"forecast-prefix,omitempty"`
	ForecastPrefixName string `json:"forecast-prefix-name,omitempty"`

	// spd and eaglet
	DraftLen int `json:"draft-len,omitempty"`

	// lade
	Window int `json:"window,omitempty"`
	NGram  int `json:"ngram,omitempty"`
	GCap   int `json:"gcap,omitempty"`

	// eaglet
	NBranches       int `json:"n-branches,omitempty"`
	MaxTargetTokens int `json:"max-tokens-target-can-evaluate,omitempty"`
}

// Speculative reports whether the dialog verifies drafted tokens, i.e.
// passes a selection mask to Genie's KV manager.
func (d *Dialog) Speculative() bool { return d.Type != Basic && d.Type != "" }

// Tree reports whether drafted tokens sit at positions other than
// n_past, n_past+1, … (a draft tree or lookahead window), so that only
// RoPE positions computed by Genie from the attention map are right.
func (d *Dialog) Tree() bool { return d.Type == SSD || d.Type == LADE || d.Type == Eaglet }

// Nodes is the SSD draft-tree size 1 + b0 + b0·b1 + … (0 for other dialogs).
func (d *Dialog) Nodes() int {
	if d.Type != SSD {
		return 0
	}
	n, level := 1, 1
	for _, b := range d.Branches {
		level *= b
		n += level
	}
	return n
}

// StepTokens is m, the tokens a decode step submits to the target model
// and so the length of the selection mask it passes to updateKV
// (qnn-genie.md §1.3–1.5): basic 1; ssd-q1 nodes × (1 + len(branches));
// spd draft-len + 1; lade (window + gcap) × (ngram − 1); eaglet
// max-tokens-target-can-evaluate (the most the target verifies at once).
func (d *Dialog) StepTokens() int {
	switch d.Type {
	case SSD:
		return d.Nodes() * (1 + len(d.Branches))
	case SPD:
		return d.DraftLen + 1
	case LADE:
		return (d.Window + d.GCap) * (d.NGram - 1)
	case Eaglet:
		return d.MaxTargetTokens
	}
	return 1
}

// validate applies Genie's dialog validators (Dialog.cpp) plus the bounds
// that keep the derived sizes meaningful.
func (d *Dialog) validate() error {
	const limit = 1 << 20 // keeps products of user numbers far from overflow
	pos := func(key string, v int) error {
		if v <= 0 || v > limit {
			return fmt.Errorf("dialog %s: %s = %d, want 1…%d", d.Type, key, v, limit)
		}
		return nil
	}
	switch d.Type {
	case Basic:
		return nil
	case SSD:
		if err := pos("forecast-token-count", d.ForecastTokenCount); err != nil {
			return err
		}
		if len(d.Branches) == 0 {
			return fmt.Errorf("dialog ssd-q1: branches is empty, want at least one level (e.g. [3,2])")
		}
		if len(d.Branches) > d.ForecastTokenCount {
			return fmt.Errorf("dialog ssd-q1: %d branch levels but forecast-token-count is %d; Genie requires len(branches) ≤ forecast-token-count", len(d.Branches), d.ForecastTokenCount)
		}
		nodes := 1
		for i, b := range d.Branches {
			if err := pos(fmt.Sprintf("branches[%d]", i), b); err != nil {
				return err
			}
			nodes *= b
			if nodes > limit {
				return fmt.Errorf("dialog ssd-q1: branches %v make a draft tree of more than %d nodes", d.Branches, limit)
			}
		}
		if d.ForecastPrefix < 0 || d.ForecastPrefix > limit {
			return fmt.Errorf("dialog ssd-q1: forecast-prefix = %d, want 0…%d", d.ForecastPrefix, limit)
		}
		if d.Nodes()*(1+len(d.Branches)) > limit {
			return fmt.Errorf("dialog ssd-q1: branches %v make %d tokens per step, more than %d", d.Branches, d.Nodes()*(1+len(d.Branches)), limit)
		}
		return nil
	case SPD:
		return pos("draft-len", d.DraftLen)
	case LADE:
		if err := pos("window", d.Window); err != nil {
			return err
		}
		if d.NGram < 2 || d.NGram > limit {
			return fmt.Errorf("dialog lade: ngram = %d, want 2…%d", d.NGram, limit)
		}
		if d.GCap < 0 || d.GCap > limit {
			return fmt.Errorf("dialog lade: gcap = %d, want 0…%d", d.GCap, limit)
		}
		if (d.Window+d.GCap)*(d.NGram-1) > limit {
			return fmt.Errorf("dialog lade: (window+gcap)×(ngram−1) = %d tokens per step, more than %d", (d.Window+d.GCap)*(d.NGram-1), limit)
		}
		return nil
	case Eaglet:
		for _, kv := range []struct {
			k string
			v int
		}{{"draft-len", d.DraftLen}, {"n-branches", d.NBranches}, {"max-tokens-target-can-evaluate", d.MaxTargetTokens}} {
			if err := pos(kv.k, kv.v); err != nil {
				return err
			}
		}
		return nil
	case "":
		return fmt.Errorf("dialog type is empty, want basic, ssd-q1, spd, lade or eaglet")
	}
	return fmt.Errorf("unknown dialog type %q, want basic, ssd-q1, spd, lade or eaglet", d.Type)
}

// Options choose how NewPlan splits and shapes a model. The zero value
// (after defaults) is: stages balanced by bytes under 2 GiB each, CL
// min(context length, 4096), AR {128, 1} (the 128 lowered to at most CL/4
// for short contexts), RoPE, basic dialog, vtcm_mb 8.
type Options struct {
	// Exactly one way to split, or none for balanced-by-bytes:
	LayersPerStage int // every stage gets this many layers (the last may get fewer)
	Stages         int // this many stages, layers spread evenly (earlier stages get the remainder)
	// MaxStageBytes bounds a stage's weight bytes (its context binary) in
	// balanced mode: the fewest stages that fit, with the largest as small
	// as possible. 0 means DefaultMaxStageBytes. In the other modes a
	// larger stage is left for Check to report, unless it is one layer.
	MaxStageBytes int64
	// Container is the width Q1_0/Q2_0 codes are exported in, and so what
	// stage sizes are measured in (PlanModel, ModelSizes); 0 means 4bit.
	Container Container

	AR []int // tokens per call of each graph variant; nil for the default
	CL []int // context lengths; nil for the default
	// ARc allows CL == AR graphs, which Genie runs in AR-c mode
	// (re-processing all past tokens every call). Without it AR ≥ CL is an
	// error.
	ARc bool

	// Positional "" means Rope, or Absolute for a model with linear or
	// yarn RoPE scaling, whose tables Genie cannot compute.
	Positional Positional
	Dialog     Dialog // Type "" means Basic
	// EagletHead, with an eaglet dialog, adds the EAGLE-3 head's draft
	// graphs and the target surfaces it reads (eagle3_tap_L, fc in the
	// last stage's last_hidden_states).
	EagletHead *EagletHead

	VTCMMB int // HTP vtcm_mb for every graph; 0 means MinVTCMOneBit (8)

	// LayerTypes is the lowest-bit weight-matrix type of each layer (len
	// == Layers), or one type for all layers; nil when unknown.
	LayerTypes []gguf.Type

	// ContextSize is Genie's context.size; 0 means the largest CL.
	ContextSize int

	// ProbePromptTokens is the prompt length for which the plan records
	// the n_process and token-history numbers of each variant's first
	// speculative step (0 means 1). Check can override it.
	ProbePromptTokens int
}

// withDefaults returns a copy of o with defaults filled in, validated
// against cfg and the layer count.
func (o Options) withDefaults(layers, contextLength int) (Options, error) {
	if o.LayersPerStage < 0 || o.Stages < 0 || o.MaxStageBytes < 0 || o.VTCMMB < 0 || o.ContextSize < 0 || o.ProbePromptTokens < 0 {
		return o, fmt.Errorf("negative option value (layers-per-stage %d, stages %d, max-stage-bytes %d, vtcm-mb %d, context-size %d, probe-prompt %d)",
			o.LayersPerStage, o.Stages, o.MaxStageBytes, o.VTCMMB, o.ContextSize, o.ProbePromptTokens)
	}
	if o.LayersPerStage > 0 && o.Stages > 0 {
		return o, fmt.Errorf("both layers-per-stage (%d) and stages (%d) given; choose one way to split", o.LayersPerStage, o.Stages)
	}
	if o.Stages > layers {
		return o, fmt.Errorf("%d stages for %d layers: a stage needs at least one layer", o.Stages, layers)
	}
	if o.LayersPerStage > layers {
		return o, fmt.Errorf("%d layers per stage but the model has only %d layers", o.LayersPerStage, layers)
	}
	if o.MaxStageBytes == 0 {
		o.MaxStageBytes = DefaultMaxStageBytes
	}
	if o.Container != 0 && !o.Container.Valid() {
		return o, fmt.Errorf("container %d bits, want 4 or 8", int(o.Container))
	}
	if len(o.CL) == 0 {
		cl := 4096
		if contextLength > 0 && contextLength < cl {
			cl = contextLength
		}
		o.CL = []int{cl}
	}
	if len(o.AR) == 0 {
		// 128 for prompts and 1 for decoding, with the prompt AR kept at
		// most a quarter of a short context so KV graphs stay CL > AR.
		ar := 128
		for ar > 1 && ar > slices.Min(o.CL)/4 {
			ar /= 2
		}
		o.AR = []int{ar}
		if ar > 1 {
			o.AR = append(o.AR, 1)
		}
	}
	o.AR, o.CL = slices.Clone(o.AR), slices.Clone(o.CL)
	for _, list := range []struct {
		name string
		v    []int
	}{{"AR", o.AR}, {"CL", o.CL}} {
		for i, v := range list.v {
			if v <= 0 || v > 1<<24 {
				return o, fmt.Errorf("%s %d out of range 1…%d", list.name, v, 1<<24)
			}
			if slices.Contains(list.v[:i], v) {
				return o, fmt.Errorf("%s %d listed twice", list.name, v)
			}
		}
	}
	for _, ar := range o.AR {
		for _, cl := range o.CL {
			switch {
			case ar > cl:
				return o, fmt.Errorf("AR %d > CL %d: a graph cannot process more tokens than its context holds", ar, cl)
			case ar == cl && !o.ARc:
				return o, fmt.Errorf("AR %d == CL %d makes an AR-c graph that re-processes all history (and breaks speculative dialogs); use a CL larger than every AR, or allow AR-c graphs explicitly (--arc)", ar, cl)
			}
		}
	}
	switch o.Positional {
	case "":
		o.Positional = Rope
	case Rope, Absolute:
	default:
		return o, fmt.Errorf("unknown positional encoding %q, want rope or absolute", o.Positional)
	}
	if o.Dialog.Type == "" {
		o.Dialog.Type = Basic
	}
	o.Dialog.Branches = slices.Clone(o.Dialog.Branches)
	if err := o.Dialog.validate(); err != nil {
		return o, err
	}
	if o.EagletHead != nil && o.Dialog.Type != Eaglet {
		return o, fmt.Errorf("an EAGLE-3 head drafts only in the eaglet dialog, not %s", o.Dialog.Type)
	}
	if o.VTCMMB == 0 {
		o.VTCMMB = MinVTCMOneBit
	}
	if o.ContextSize == 0 {
		o.ContextSize = slices.Max(o.CL)
	}
	if o.ProbePromptTokens == 0 {
		o.ProbePromptTokens = 1
	}
	if o.ProbePromptTokens > 1<<24 {
		return o, fmt.Errorf("probe prompt of %d tokens, want at most %d", o.ProbePromptTokens, 1<<24)
	}
	if n := len(o.LayerTypes); n != 0 && n != 1 && n != layers {
		return o, fmt.Errorf("%d layer types for %d layers; give one per layer or one for all", n, layers)
	}
	for _, t := range o.LayerTypes {
		if !t.Valid() {
			return o, fmt.Errorf("invalid weight type %s", t)
		}
	}
	return o, nil
}
