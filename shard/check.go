package shard

import (
	"fmt"
	"math/bits"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/model"
)

// Rule ids reported by Check. They are stable: scripts may match on them.
const (
	RuleARcMask      = "GENIE-ARC-MASK"        // AR-c graph with a speculative dialog
	RuleDetect       = "GENIE-ARCL-DETECT"     // Genie would detect another AR or CL than planned
	RuleMissingInput = "GENIE-MISSING-INPUT"   // input_ids, attention_mask, positions or logits missing
	RuleShape        = "GENIE-SHAPE"           // a tensor Genie shape-checks has the wrong shape
	RuleEncoding     = "GENIE-ENCODING"        // one tensor name (or _in/_out pair) with two encodings
	RuleLink         = "GENIE-LINK"            // a stage input nobody produces, or same name with two shapes
	RuleNameOrder    = "GENIE-NAME-ORDER"      // graph names do not sort in stage order
	RuleMissingGraph = "GENIE-MISSING-GRAPH"   // a variant lacks a stage's graph
	RuleDupARCL      = "GENIE-DUP-ARCL"        // two graphs of one stage with the same (AR, CL)
	RuleSSDAR        = "GENIE-SSD-AR"          // no AR holds an ssd-q1 step
	RuleSpecAR       = "GENIE-SPEC-AR"         // no AR holds a spd/lade/eaglet step
	RuleAbsoluteTree = "GENIE-ABS-TREE"        // absolute positions with a tree dialog
	RuleGDNSpec      = "GENIE-GDN-SPEC"        // speculative dialog on a model with GDN state
	RuleRopeScaling  = "GENIE-ROPE-SCALING"    // RoPE positions for a scaling Genie cannot compute
	RuleRecurrent    = "GENIE-RECURRENT-STATE" // past_conv/past_ssm surfaces, which Genie does not carry
	RuleContextBytes = "QNN-CONTEXT-2GIB"      // a context binary over the size limit
	RuleVTCMOneBit   = "HTP-VTCM-1BIT"         // vtcm_mb below 8 for a 1-bit stage
	RuleContextSize  = "GENIE-CTX-SIZE"        // context.size above the largest CL
)

// Violation is one broken rule.
type Violation struct {
	Rule    string `json:"rule"`
	Graph   string `json:"graph,omitempty"`
	Tensor  string `json:"tensor,omitempty"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

func (v Violation) String() string {
	where := v.Graph
	if v.Tensor != "" {
		where += "/" + v.Tensor
	}
	if where != "" {
		where = " " + where
	}
	return fmt.Sprintf("%s%s: %s (fix: %s)", v.Rule, where, v.Message, v.Fix)
}

// CheckEnv holds what the checker assumes beyond the plan.
type CheckEnv struct {
	// ProbePromptTokens is the prompt length whose first speculative step
	// the n_process and token-history numbers in messages describe; 0
	// means the plan's Dialog.ProbePromptTokens. Only the numbers depend
	// on it, except that a speculative dialog's context must hold the
	// forecast prefix, this prompt and one step (GENIE-CTX-SIZE).
	ProbePromptTokens int
	// MaxContextBytes is the largest context binary allowed; 0 means
	// DefaultMaxStageBytes (2 GiB).
	MaxContextBytes int64
	// StateRuntime says the bundle will run under a runtime that feeds
	// past_conv/past_ssm outputs back into their inputs between calls (as
	// qnnprep's staged runtime does), so GENIE-RECURRENT-STATE is not
	// reported.
	StateRuntime bool
}

// Check returns every violation of Genie's I/O contract (and of the HTP
// limits qnnprep knows) in p, in a fixed order; none means the plan is
// consistent. Check trusts nothing but the graphs' tensors for what Genie
// detects, exactly as Genie does.
func Check(p *Plan, env CheckEnv) []Violation {
	if env.ProbePromptTokens <= 0 {
		env.ProbePromptTokens = max(1, p.Dialog.ProbePromptTokens)
	}
	if env.MaxContextBytes <= 0 {
		env.MaxContextBytes = DefaultMaxStageBytes
	}
	c := checker{p: p, env: env}
	c.detectAll()
	c.dialogRules()
	c.stageRules()
	c.graphRules()
	c.groupRules()
	c.encodingRule()
	c.linkRule()
	c.arcMaskRule()
	c.eagletRules()
	return c.out
}

type checker struct {
	p   *Plan
	env CheckEnv
	out []Violation
	det []arcl // detected (AR, CL) per graph
}

type arcl struct{ ar, cl int }

func (c *checker) add(rule, graph, tensor, fix, format string, args ...any) {
	c.out = append(c.out, Violation{Rule: rule, Graph: graph, Tensor: tensor, Message: fmt.Sprintf(format, args...), Fix: fix})
}

func (c *checker) detectAll() {
	c.det = make([]arcl, len(c.p.Graphs))
	for i := range c.p.Graphs {
		ar, cl := DetectARCL(&c.p.Graphs[i])
		c.det[i] = arcl{ar, cl}
	}
}

var (
	arRe  = regexp.MustCompile(`(ar|AR)_?(\d+)`)
	clRe  = regexp.MustCompile(`(cl|CL)_?(\d+)`)
	numRe = regexp.MustCompile(`\d+`)
)

// DetectARCL returns the AR and CL Genie derives from a graph's I/O and
// name (qnn-genie.md §0.3, nsp-graph.cpp): AR from input_ids, else
// attention_mask numel ÷ its largest dim, else a past_*key*_out's last
// dim, else logits numel ÷ last dim, else "ar<N>" in the name; CL from
// attention_mask's last dim, else past_key_X_out + past_key_X_in last
// dims, else "cl<N>" in the name, else the largest number in the name if
// > 501. An undetectable value is -1.
func DetectARCL(g *Graph) (ar, cl int) {
	in := func(name string) *Tensor { return find(g.Inputs, name) }
	ar, cl = -1, -1
	isKeyOut := func(n string) bool {
		return strings.HasPrefix(n, "past_") && strings.Contains(n, "key") && strings.HasSuffix(n, "_out")
	}
	switch t := in(InputIDs); {
	case t != nil:
		ar = clampInt(numel(t.Shape))
	default:
		if m := in(AttentionMask); m != nil {
			ar = clampInt(numel(m.Shape) / max(1, slices.Max(m.Shape)))
			break
		}
		for i := range g.Outputs {
			if isKeyOut(g.Outputs[i].Name) {
				ar = clampInt(last(g.Outputs[i].Shape))
				break
			}
		}
		if ar >= 0 {
			break
		}
		if l := find(g.Outputs, Logits); l != nil {
			ar = clampInt(numel(l.Shape) / max(1, last(l.Shape)))
			break
		}
		if m := arRe.FindStringSubmatch(g.Name); m != nil {
			ar = atoi(m[2])
		}
	}

	if m := in(AttentionMask); m != nil {
		return ar, clampInt(last(m.Shape))
	}
	for i := range g.Outputs {
		o := &g.Outputs[i]
		if isKeyOut(o.Name) {
			if kin := in(strings.TrimSuffix(o.Name, "_out") + "_in"); kin != nil {
				return ar, clampInt(last(o.Shape) + last(kin.Shape))
			}
		}
	}
	if m := clRe.FindStringSubmatch(g.Name); m != nil {
		return ar, atoi(m[2])
	}
	for _, s := range numRe.FindAllString(g.Name, -1) {
		if n := atoi(s); n > 501 && n > cl {
			cl = n
		}
	}
	return ar, cl
}

func (c *checker) dialogRules() {
	p := c.p
	d := &p.Dialog
	m := d.StepTokens
	if d.Speculative() {
		maxAR := 0
		for _, a := range c.det {
			maxAR = max(maxAR, a.ar)
		}
		if maxAR < m {
			fix := fmt.Sprintf("add a graph variant with AR ≥ %d (e.g. --ar %d plus the prompt AR)", m, nextPow2(m))
			if d.Type == SSD {
				c.add(RuleSSDAR, "", "", fix,
					"ssd-q1 with branches %v needs nodes × (1 + len(branches)) = %d × %d = %d tokens per step, but the largest AR is %d",
					d.Branches, d.Dialog.Nodes(), 1+len(d.Branches), m, maxAR)
			} else {
				c.add(RuleSpecAR, "", "", fix, "%s submits %d tokens per step (%s), but the largest AR is %d", d.Type, m, stepFormula(&d.Dialog), maxAR)
			}
		}
	}
	if p.Positional == Absolute && d.Tree() {
		c.add(RuleAbsoluteTree, "", "", "use RoPE positions (--positional rope); Genie then computes tree-aware positions from the attention map",
			"%s drafts a tree, but with absolute positions Genie fills position_ids with n_past, n_past+1, … (iota), so siblings get different positions and any forecast prefix counts into n_past: drafts are verified at wrong positions", d.Type)
	}
	if s := p.Model.RopeScaling; p.Positional == Rope && s != "" && s != string(model.RopeLlama3) {
		c.add(RuleRopeScaling, "", "", "use absolute positions (--positional absolute): each graph then holds the scaled cos/sin tables and looks its rows up by position",
			"the model scales RoPE with %s, but Genie computes the position_ids_cos/_sin tables itself and its rope-scaling knows only llama3, default and longrope: every position would be rotated unscaled", s)
	}
	if d.Speculative() && p.Model.Hybrid() {
		var gdn []int
		for i, k := range p.Model.LayerKinds {
			if k == "deltanet" {
				gdn = append(gdn, i)
			}
		}
		c.add(RuleGDNSpec, "", "", "decode speculatively with qnnprep's runtime (qnnprep speculate), which checkpoints and rolls back GDN state; on Genie no dialog works for this model (see "+RuleRecurrent+")",
			"%s needs rejected drafts rolled back, but %d Gated DeltaNet layers (%s) carry conv/recurrent state that Genie's KV manager neither carries nor rolls back with a selection mask",
			d.Type, len(gdn), intRanges(gdn))
	}
	if layers := StateLayers(p); len(layers) > 0 && !c.env.StateRuntime {
		c.add(RuleRecurrent, "", "",
			"run the bundle with a runtime that copies each past_conv/past_ssm _out into its _in between calls, as qnnprep's staged runtime does (qnnprep run --plan), and build with --allow-recurrent-state; for Genie, use a model without Gated DeltaNet layers",
			"the graphs carry Gated DeltaNet state between calls in past_conv_L_in/_out and past_ssm_L_in/_out for layers %s (%d tensors), but Genie's KV manager carries only past_*key*/past_*value* tensors from _out to _in, so with any dialog, basic included, every call would start from stale state (this reflects Genie as shipped in QAIRT 2.40.0.251030; no public source shows a later Genie carrying recurrent state)",
			intRanges(layers), len(StateTensors(p)))
	}
	maxCL := 0
	for _, v := range p.Variants {
		maxCL = max(maxCL, v.CL)
	}
	for _, a := range c.det {
		maxCL = max(maxCL, a.cl)
	}
	if p.ContextSize > maxCL {
		c.add(RuleContextSize, "", "", fmt.Sprintf("set context.size to at most %d, or add a CL ≥ %d", maxCL, p.ContextSize),
			"context.size %d is above the largest CL %d; Genie refuses: \"Config specifies context->size=%d, but loaded max-CL=%d\"", p.ContextSize, maxCL, p.ContextSize, maxCL)
	}
	if need := d.PrefixKV + c.env.ProbePromptTokens + m; d.Speculative() && min(p.ContextSize, maxCL) < need {
		c.add(RuleContextSize, "", "", fmt.Sprintf("use a context of at least %d (a CL and context.size ≥ %d)", need, need),
			"context %d cannot hold %d prefix + %d prompt + %d step tokens = %d", min(p.ContextSize, maxCL), d.PrefixKV, c.env.ProbePromptTokens, m, need)
	}
}

func (c *checker) stageRules() {
	for _, s := range c.p.Stages {
		g := ""
		if len(s.Graphs) > 0 {
			g = s.Graphs[0]
		}
		if s.Bytes > c.env.MaxContextBytes {
			c.add(RuleContextBytes, g, "", "split into more stages: balance by bytes (no --stages/--layers-per-stage) or raise --stages",
				"stage %d (layers %d…%d) holds %s of weights on the device (%s container; %s in the qmodel); a context binary over %s fails to serialize (\"memory usage too large\")",
				s.Index, s.FirstLayer, s.LastLayer, bytesize.Format(s.Bytes), c.p.Container, bytesize.Format(s.QModelBytes), bytesize.Format(c.env.MaxContextBytes))
		}
		if s.OneBit() && c.p.VTCMMB < MinVTCMOneBit {
			c.add(RuleVTCMOneBit, g, "", fmt.Sprintf("set --vtcm-mb %d", MinVTCMOneBit),
				"stage %d has %s weights but vtcm_mb is %d; 1-bit stages are given at least %d MB of VTCM (qnnprep's rule: their finalize needs the full TCM; not confirmed by a public source)",
				s.Index, s.WeightType, c.p.VTCMMB, MinVTCMOneBit)
		}
	}
}

// graphRules checks each graph alone: detection, required inputs, shapes.
func (c *checker) graphRules() {
	p := c.p
	n := len(p.Stages)
	for gi := range p.Graphs {
		g := &p.Graphs[gi]
		det := c.det[gi]
		if det.ar != g.AR || det.cl != g.CL {
			c.add(RuleDetect, g.Name, "", "give every stage with attention an attention_mask [1,1,AR,CL] and keep \"ar<AR>_cl<CL>\" in the graph name",
				"planned AR %d, CL %d but Genie detects AR %d, CL %d from this graph's I/O and name", g.AR, g.CL, det.ar, det.cl)
		}
		ar, cl := int64(g.AR), int64(g.CL)
		if g.Stage == 0 && p.Dialog.Type != Eaglet { // eaglet: eagletRules
			c.need(g, InputIDs, true, nil)
			if t := find(g.Inputs, InputIDs); t != nil && numel(t.Shape) != ar {
				c.add(RuleShape, g.Name, InputIDs, "make input_ids [1, AR] int32", "shape %v, want %d ids [1, %d]", t.Shape, ar, ar)
			}
		}
		if g.Stage == n-1 {
			c.need(g, Logits, false, nil)
			if t := find(g.Outputs, Logits); t != nil && !tail(t.Shape, ar, int64(p.Model.Vocab)) {
				c.add(RuleShape, g.Name, Logits, "make logits [1, AR, vocab]", "shape %v, want [1, %d, %d]", t.Shape, ar, p.Model.Vocab)
			}
		}
		if c.hasAttention(g.Stage) {
			c.need(g, AttentionMask, true, []int64{1, 1, ar, cl})
			if p.Positional == Absolute {
				c.need(g, PositionIDs, true, []int64{1, 1, ar})
			} else {
				rd := int64(p.RopeDim)
				c.need(g, PositionIDsCos, true, []int64{1, 1, ar, rd})
				c.need(g, PositionIDsSin, true, []int64{1, 1, ar, rd})
			}
		}
		// KV layouts Genie checks: keys (*, kv-dim, n), values (*, n, kv-dim).
		kvDim := int64(p.Model.HeadDim)
		for _, io := range []struct {
			ts  []Tensor
			n   int64
			dir string
		}{{g.Inputs, cl - ar, "_in"}, {g.Outputs, ar, "_out"}} {
			for _, t := range io.ts {
				if !strings.HasPrefix(t.Name, "past_") || !strings.HasSuffix(t.Name, io.dir) {
					continue
				}
				var ok bool
				var want string
				switch {
				case strings.Contains(t.Name, "key"):
					ok, want = tail(t.Shape, kvDim, io.n), fmt.Sprintf("[…, %d, %d] (kv-dim, positions)", kvDim, io.n)
				case strings.Contains(t.Name, "value"):
					ok, want = tail(t.Shape, io.n, kvDim), fmt.Sprintf("[…, %d, %d] (positions, kv-dim)", io.n, kvDim)
				default:
					continue
				}
				if !ok {
					c.add(RuleShape, g.Name, t.Name, "lay keys out [n_kv,1,head_dim,N] and values [n_kv,1,N,head_dim], N = CL−AR in, AR out",
						"shape %v, want %s", t.Shape, want)
				}
			}
		}
	}
	// Genie needs input_ids (embeddings for eaglet) and attention_mask in
	// some graph of each variant.
	input := InputIDs
	if p.Dialog.Type == Eaglet {
		input = InputEmbeds
	}
	for _, v := range c.variants() {
		for _, name := range []string{input, AttentionMask} {
			found := false
			for gi := range p.Graphs {
				if c.det[gi] == v && find(p.Graphs[gi].Inputs, name) != nil {
					found = true
				}
			}
			if !found {
				c.add(RuleMissingInput, fmt.Sprintf("ar%d_cl%d", v.ar, v.cl), name, "feed "+name+" to the stage graphs",
					"no graph of variant AR %d, CL %d takes %s; Genie requires it in some graph", v.ar, v.cl, name)
			}
		}
	}
}

// need reports a missing input (or output) and, with want, a shape that
// is not want after right-aligning both to rank 4 as Genie does.
func (c *checker) need(g *Graph, name string, input bool, want []int64) {
	ts := g.Outputs
	if input {
		ts = g.Inputs
	}
	t := find(ts, name)
	if t == nil {
		what := "output"
		if input {
			what = "input"
		}
		fix := "add " + name
		switch name {
		case PositionIDs, PositionIDsCos, PositionIDsSin:
			fix = fmt.Sprintf("add %s, or switch positional encoding (the plan says %s)", name, c.p.Positional)
		}
		c.add(RuleMissingInput, g.Name, name, fix, "stage %d graph has no %s %s; Genie fails with \"Tensor not found: %s\"", g.Stage, name, what, name)
		return
	}
	if want != nil && !slices.Equal(rank4(t.Shape), rank4(want)) {
		c.add(RuleShape, g.Name, name, fmt.Sprintf("make %s %v", name, want), "shape %v, want %v", t.Shape, want)
	}
}

func (c *checker) hasAttention(stage int) bool {
	if stage < 0 || stage >= len(c.p.Stages) {
		return false
	}
	s := c.p.Stages[stage]
	for l := max(0, s.FirstLayer); l <= s.LastLayer && l < len(c.p.Model.LayerKinds); l++ {
		if c.p.Model.LayerKinds[l] == "attention" {
			return true
		}
	}
	return false
}

// variants lists the detected (AR, CL) pairs in first-seen order.
func (c *checker) variants() []arcl {
	var vs []arcl
	for _, a := range c.det {
		if !slices.Contains(vs, a) {
			vs = append(vs, a)
		}
	}
	return vs
}

// groupRules checks graphs as Genie groups them: by detected (AR, CL),
// split index = lexical name order.
func (c *checker) groupRules() {
	p := c.p
	seen := map[string]bool{}
	for _, g := range p.Graphs {
		if seen[g.Name] {
			c.add(RuleNameOrder, g.Name, "", "give every graph a unique name", "graph name used twice")
		}
		seen[g.Name] = true
	}
	for _, v := range c.variants() {
		var idx []int
		for gi := range p.Graphs {
			if c.det[gi] == v {
				idx = append(idx, gi)
			}
		}
		// Duplicates within one stage (one context binary).
		stages := map[int]int{}
		for _, gi := range idx {
			g := &p.Graphs[gi]
			if prev, dup := stages[g.Stage]; dup {
				c.add(RuleDupARCL, g.Name, "", "keep one graph per (AR, CL) in each stage",
					"stage %d has two graphs with AR %d, CL %d (also %s); Genie fails with \"Detected duplicate AR-%d CL-%d graphs\"",
					g.Stage, v.ar, v.cl, p.Graphs[prev].Name, v.ar, v.cl)
				continue
			}
			stages[g.Stage] = gi
		}
		for s := range p.Stages {
			if _, ok := stages[s]; !ok {
				c.add(RuleMissingGraph, fmt.Sprintf("ar%d_cl%d", v.ar, v.cl), "", "build every stage for every (AR, CL) variant",
					"variant AR %d, CL %d has no graph for stage %d; Genie assigns split indices by name order and would feed the wrong stage", v.ar, v.cl, s)
			}
		}
		sorted := slices.Clone(idx)
		slices.SortStableFunc(sorted, func(a, b int) int { return strings.Compare(p.Graphs[a].Name, p.Graphs[b].Name) })
		for i := 1; i < len(sorted); i++ {
			a, b := &p.Graphs[sorted[i-1]], &p.Graphs[sorted[i]]
			if a.Stage > b.Stage {
				c.add(RuleNameOrder, b.Name, "", "zero-pad stage numbers: {model}_ar{AR}_cl{CL}_{NN}_of_{MM}",
					"stage %d's graph sorts before stage %d's (%s): Genie orders splits by graph name, so it would run them out of order", b.Stage, a.Stage, a.Name)
			}
		}
	}
}

// encodingRule: Genie requires one scale/offset per tensor name across all
// graphs, X_in normalized to X_out, and quantizes both RoPE tables with
// position_ids_cos's encoding; logits are exempt (nsp-model.cpp ~800-822).
func (c *checker) encodingRule() {
	type first struct{ enc, graph, tensor string }
	seen := map[string]first{}
	for _, g := range c.p.Graphs {
		for _, t := range append(g.Inputs[:len(g.Inputs):len(g.Inputs)], g.Outputs...) {
			if t.Name == Logits {
				continue
			}
			key := t.Name
			if strings.HasSuffix(key, "_in") {
				key = strings.TrimSuffix(key, "_in") + "_out"
			}
			if key == PositionIDsSin {
				key = PositionIDsCos
			}
			f, ok := seen[key]
			if !ok {
				seen[key] = first{t.Encoding, g.Name, t.Name}
				continue
			}
			if f.enc != t.Encoding {
				c.add(RuleEncoding, g.Name, t.Name, fmt.Sprintf("give %s and %s one encoding group", t.Name, f.tensor),
					"encoding %q differs from %q of %s in %s; Genie fails with \"Non-identical quantization parameters found for the same tensor\"",
					t.Encoding, f.enc, f.tensor, f.graph)
			}
		}
	}
}

// linkRule: within a variant, same-named tensors share one buffer, so
// their shapes must agree, and each stage input that Genie does not fill
// itself must be an earlier stage's output.
func (c *checker) linkRule() {
	p := c.p
	genieFed := func(n string) bool {
		switch n {
		case InputIDs, InputEmbeds, AttentionMask, PositionIDsCos, PositionIDsSin, PositionIDs:
			return true
		}
		return strings.HasPrefix(n, "past_") && strings.HasSuffix(n, "_in")
	}
	for _, v := range c.variants() {
		type src struct {
			shape []int64
			stage int
			graph string
		}
		outs := map[string]src{}
		ins := map[string]src{}
		for gi := range p.Graphs {
			if c.det[gi] != v {
				continue
			}
			g := &p.Graphs[gi]
			for _, t := range g.Outputs {
				if prev, ok := outs[t.Name]; ok && !slices.Equal(prev.shape, t.Shape) {
					c.add(RuleLink, g.Name, t.Name, "give same-named tensors one shape", "shape %v, but %s outputs it as %v", t.Shape, prev.graph, prev.shape)
				} else if !ok {
					outs[t.Name] = src{t.Shape, g.Stage, g.Name}
				}
			}
			for _, t := range g.Inputs {
				if prev, ok := ins[t.Name]; ok && !slices.Equal(prev.shape, t.Shape) {
					c.add(RuleLink, g.Name, t.Name, "give same-named tensors one shape", "shape %v, but %s takes it as %v", t.Shape, prev.graph, prev.shape)
				} else if !ok {
					ins[t.Name] = src{t.Shape, g.Stage, g.Name}
				}
			}
		}
		for gi := range p.Graphs {
			if c.det[gi] != v {
				continue
			}
			g := &p.Graphs[gi]
			for _, t := range g.Inputs {
				if genieFed(t.Name) {
					continue
				}
				o, ok := outs[t.Name]
				switch {
				case !ok:
					c.add(RuleLink, g.Name, t.Name, fmt.Sprintf("make the previous stage output %s", t.Name),
						"no graph of variant AR %d, CL %d outputs %s, and Genie does not fill it", v.ar, v.cl, t.Name)
				case o.stage >= g.Stage:
					c.add(RuleLink, g.Name, t.Name, "feed each stage from an earlier stage",
						"%s comes from stage %d (%s), not from a stage before %d", t.Name, o.stage, o.graph, g.Stage)
				case !slices.Equal(o.shape, t.Shape):
					c.add(RuleLink, g.Name, t.Name, "make both sides of a stage boundary one shape",
						"input shape %v, but %s outputs %v", t.Shape, o.graph, o.shape)
				}
			}
		}
	}
}

// arcMaskRule: a graph Genie detects as AR-c (CL == AR) re-processes all
// history, so its n_process is m + n_past while a speculative dialog's
// selection mask has m entries (kvmanager.cpp:369, 711-714; qnn-genie.md §0).
func (c *checker) arcMaskRule() {
	d := &c.p.Dialog
	if !d.Speculative() {
		return
	}
	m := d.StepTokens
	for _, v := range c.variants() {
		if v.ar != v.cl || v.ar < m {
			continue
		}
		first := ""
		for gi := range c.p.Graphs {
			if c.det[gi] == v {
				first = c.p.Graphs[gi].Name
				break
			}
		}
		s := d.StepOn(ModeARc, m, c.env.ProbePromptTokens)
		hist := fmt.Sprintf("%d prompt tokens", c.env.ProbePromptTokens)
		if d.PrefixKV > 0 {
			hist = fmt.Sprintf("%d forecast-prefix + %s", d.PrefixKV, hist)
		}
		genie := fmt.Sprintf("\"Invalid selection mask size. Found %d but expected 0 or %d\"", m, s.NProcess)
		if s.HistoryExpected > s.HistoryHeld {
			genie += fmt.Sprintf(" and \"Missing token history. Expected %d, Found %d\"", s.HistoryExpected, s.HistoryHeld)
		}
		c.add(RuleARcMask, first, "",
			fmt.Sprintf("build KV graphs with CL > AR (e.g. --ar %d --cl 4096; any CL above %d) so Genie detects CL from attention_mask's last dimension, and drop --arc", v.ar, v.ar),
			"Genie treats AR %d, CL %d graphs as AR-c and re-processes history: %s's selection mask has m = %d entries (%s), but n_process = m + history = %d + %d = %d (history = %s, probe prompt of %d tokens); Genie fails with %s",
			v.ar, v.cl, d.Type, m, stepFormula(&d.Dialog), m, s.NPast, s.NProcess, hist, c.env.ProbePromptTokens, genie)
	}
}

// StateTensors lists, sorted, the past_conv_*/past_ssm_* tensors the plan's
// graphs take or give: recurrent state that must be fed back between calls
// and that Genie (2.40) does not carry.
func StateTensors(p *Plan) []string {
	var names []string
	for _, g := range p.Graphs {
		for _, t := range append(g.Inputs[:len(g.Inputs):len(g.Inputs)], g.Outputs...) {
			if isState(t.Name) && !slices.Contains(names, t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// StateLayers lists, sorted, the layers whose past_conv/past_ssm tensors
// the plan's graphs carry.
func StateLayers(p *Plan) []int {
	var layers []int
	for _, n := range StateTensors(p) {
		rest := strings.TrimPrefix(strings.TrimPrefix(n, "past_conv_"), "past_ssm_")
		num, _, _ := strings.Cut(rest, "_")
		if l, err := strconv.Atoi(num); err == nil && !slices.Contains(layers, l) {
			layers = append(layers, l)
		}
	}
	slices.Sort(layers)
	return layers
}

func isState(name string) bool {
	return strings.HasPrefix(name, "past_conv_") || strings.HasPrefix(name, "past_ssm_")
}

func stepFormula(d *Dialog) string {
	switch d.Type {
	case SSD:
		return fmt.Sprintf("nodes × (1 + len(branches)) = %d × %d", d.Nodes(), 1+len(d.Branches))
	case SPD:
		return fmt.Sprintf("draft-len + 1 = %d + 1", d.DraftLen)
	case LADE:
		return fmt.Sprintf("(window + gcap) × (ngram − 1) = (%d + %d) × %d", d.Window, d.GCap, d.NGram-1)
	case Eaglet:
		return fmt.Sprintf("max-tokens-target-can-evaluate = %d", d.MaxTargetTokens)
	}
	return "one token"
}

func find(ts []Tensor, name string) *Tensor {
	for i := range ts {
		if ts[i].Name == name {
			return &ts[i]
		}
	}
	return nil
}

// numel multiplies dims, saturating instead of overflowing.
func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > 1<<62 {
			return 1 << 62
		}
		n = int64(lo)
	}
	return n
}

func last(shape []int64) int64 {
	if len(shape) == 0 {
		return 0
	}
	return shape[len(shape)-1]
}

// tail reports whether shape ends in want.
func tail(shape []int64, want ...int64) bool {
	return len(shape) >= len(want) && slices.Equal(shape[len(shape)-len(want):], want)
}

// rank4 right-aligns a shape to rank 4 with leading 1s (qnn-utils.cpp).
func rank4(s []int64) []int64 {
	if len(s) >= 4 {
		return s
	}
	out := []int64{1, 1, 1, 1}
	copy(out[4-len(s):], s)
	return out
}

func clampInt(v int64) int {
	if v > 1<<31-1 {
		return 1<<31 - 1
	}
	return int(v)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 1<<31 - 1
	}
	return n
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// intRanges prints sorted ints compactly: 0-2,4,6-7.
func intRanges(v []int) string {
	var b strings.Builder
	for i := 0; i < len(v); {
		j := i
		for j+1 < len(v) && v[j+1] == v[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", v[i], v[j])
		} else {
			fmt.Fprintf(&b, "%d", v[i])
		}
		i = j + 1
	}
	return b.String()
}
