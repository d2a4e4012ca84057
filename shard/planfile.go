package shard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
)

// maxPlanBytes bounds what ReadPlan accepts; real plans are well under a
// few MiB.
const maxPlanBytes = 64 << 20

// Encode returns p as plan.json: struct field order, two-space indent,
// and any object or array that fits on one line (or holds only numbers
// and strings) kept on one line, so the file stays readable and the same
// plan always gives the same bytes.
func Encode(p *Plan) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("shard: encode plan: %w", err)
	}
	var out bytes.Buffer
	indent(&out, bytes.TrimSpace(buf.Bytes()), 0)
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// WritePlan writes p to path through a temporary file.
func WritePlan(path string, p *Plan) error {
	data, err := Encode(p)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("shard: write plan: %w", err)
	}
	return nil
}

// ReadPlan reads and validates a plan.json.
func ReadPlan(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPlanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("shard: read %s: %w", path, err)
	}
	if len(data) > maxPlanBytes {
		return nil, fmt.Errorf("shard: %s: larger than %d bytes, not a plan", path, maxPlanBytes)
	}
	return Decode(data, path)
}

// Decode parses plan.json bytes; name is used in errors. Unknown fields,
// an unknown version and inconsistent contents are errors.
func Decode(data []byte, name string) (*Plan, error) {
	// json.Unmarshal also rejects anything after the object.
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("shard: %s: not a plan: %w", name, err)
	}
	if head.Version == nil {
		return nil, fmt.Errorf("shard: %s: no \"version\" field; not a qnnprep plan", name)
	}
	if *head.Version != Version {
		return nil, fmt.Errorf("shard: %s: plan version %d, but this qnnprep reads version %d; re-run `qnnprep plan` with this version", name, *head.Version, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	p := new(Plan)
	f := planFile{Plan: p}
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("shard: %s: %w", name, err)
	}
	p.Stages = make([]Stage, len(f.Stages))
	for i, s := range f.Stages {
		if s.HeadParallel != nil && *s.HeadParallel {
			return nil, fmt.Errorf("shard: %s: stage %d: head_parallel is true, but head-parallel stages were removed (they never split anything: the graphs and HTP config were those of the whole stage); re-run `qnnprep plan` without --head-parallel", name, i)
		}
		p.Stages[i] = s.Stage
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("shard: %s: %w", name, err)
	}
	return p, nil
}

// planFile is what Decode reads: a Plan whose stages may still carry
// head_parallel, which version 1 plans written before its removal hold
// (false on every stage unless --head-parallel was given). False is
// ignored, so those plans still read; true is an error, because a plan
// that promised a split the build never made should not pass silently.
type planFile struct {
	*Plan
	Stages []planFileStage `json:"stages"`
}

type planFileStage struct {
	Stage
	HeadParallel *bool `json:"head_parallel"`
}

// MaxContext bounds every token count a plan holds (AR, CL, context_size,
// context_length): far above any model's context, far below sizes whose
// products overflow or whose buffers cannot be allocated.
const MaxContext = 1 << 24

// maxModelDim bounds the model's other sizes (hidden, vocab, heads, …).
const maxModelDim = 1 << 24

// MaxNameLen bounds the names a plan gives files: with a suffix such as
// ".encodings.json" and a temporary-name suffix they stay under the 255
// bytes a file name may have.
const MaxNameLen = 200

// CheckName returns an error unless s is a name a plan may give a graph or
// the model (what: "graph", "model"): 1…MaxNameLen of the ASCII letters,
// digits and '_'. Graph names become file names (<graph>.onnx,
// <graph>.dlc, <model>_NN_of_MM.bin) and C identifiers in QNN model
// libraries, so nothing else, in particular no '/', '.' or "..", is
// allowed; a hand-edited plan can never make a command write outside its
// output directory.
func CheckName(what, s string) error {
	return checkName(what, s, false)
}

// checkName is CheckName; dirName also allows '-' and '.' after the first
// character (the ssd-q1 forecast-prefix directory, "forecast-prefix").
func checkName(what, s string, dirName bool) error {
	if s == "" || len(s) > MaxNameLen {
		return fmt.Errorf("%s name %q: want 1…%d characters", what, s, MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case dirName && i > 0 && (c == '-' || c == '.'):
		default:
			allowed := "letters, digits and '_'"
			if dirName {
				allowed = "letters, digits, '_', and '-' or '.' after the first character"
			}
			return fmt.Errorf("%s name %q: character %q at %d is not allowed (a name is one path element of %s)", what, s, c, i, allowed)
		}
	}
	return nil
}

// validate checks what Check and the exporters index by, so a hand-edited
// plan fails here with a message rather than deeper down: names that
// become file names, token counts and sizes within bounds, graphs that the
// stages and variants account for exactly once.
func (p *Plan) validate() error {
	if len(p.Stages) == 0 {
		return errors.New("no stages")
	}
	if err := CheckName("model", p.Model.Name); err != nil {
		return err
	}
	if n := p.Dialog.ForecastPrefixName; n != "" {
		if err := checkName("dialog forecast-prefix-name", n, true); err != nil {
			return err
		}
	}
	pm := &p.Model
	for _, f := range []struct {
		key   string
		v, hi int
	}{
		{"layers", pm.Layers, maxModelDim}, {"hidden", pm.Hidden, maxModelDim}, {"ffn", pm.FFN, maxModelDim},
		{"vocab", pm.Vocab, maxModelDim}, {"heads", pm.Heads, maxModelDim}, {"kv_heads", pm.KVHeads, maxModelDim},
		{"head_dim", pm.HeadDim, maxModelDim}, {"rotary_dim", pm.RotaryDim, maxModelDim},
		{"context_length", pm.ContextLength, MaxContext}, {"conv_kernel", pm.ConvKernel, maxModelDim},
		{"conv_dim", pm.ConvDim, maxModelDim}, {"ssm_value_heads", pm.SSMValueHeads, maxModelDim},
		{"ssm_key_dim", pm.SSMKeyDim, maxModelDim}, {"ssm_value_dim", pm.SSMValueDim, maxModelDim},
		{"context_size", p.ContextSize, MaxContext}, {"rope_dim", p.RopeDim, maxModelDim}, {"vtcm_mb", p.VTCMMB, 1 << 16},
		{"dialog embedding_rows", p.Dialog.EmbeddingRows, maxModelDim},
	} {
		if f.v < 0 || f.v > f.hi {
			return fmt.Errorf("%s %d: want 0…%d", f.key, f.v, f.hi)
		}
	}
	if p.MaxStageBytes < 0 || p.MaxStageBytes > 1<<50 {
		return fmt.Errorf("max_stage_bytes %d: want 0…%d", p.MaxStageBytes, int64(1)<<50)
	}
	variants := map[[2]int]bool{}
	for _, v := range p.Variants {
		if v.AR < 1 || v.CL < 1 || v.AR > MaxContext || v.CL > MaxContext {
			return fmt.Errorf("variant AR %d, CL %d: want 1…%d tokens each", v.AR, v.CL, MaxContext)
		}
		if v.AR > v.CL {
			return fmt.Errorf("variant AR %d, CL %d: AR above CL", v.AR, v.CL)
		}
		if pm.ContextLength > 0 && v.CL > pm.ContextLength {
			return fmt.Errorf("variant AR %d, CL %d: CL above the model's context length %d", v.AR, v.CL, pm.ContextLength)
		}
		if variants[[2]int{v.AR, v.CL}] {
			return fmt.Errorf("variant AR %d, CL %d listed twice", v.AR, v.CL)
		}
		variants[[2]int{v.AR, v.CL}] = true
	}
	if p.Model.Layers <= 0 || len(p.Model.LayerKinds) != p.Model.Layers {
		return fmt.Errorf("model has %d layers but %d layer kinds", p.Model.Layers, len(p.Model.LayerKinds))
	}
	for i, k := range p.Model.LayerKinds {
		if k != "attention" && k != "deltanet" {
			return fmt.Errorf("layer %d: unknown kind %q, want attention or deltanet", i, k)
		}
	}
	if !p.Container.Valid() {
		return fmt.Errorf("container %d bits, want 4bit or 8bit", int(p.Container))
	}
	if err := p.Dialog.validate(); err != nil {
		return err
	}
	if d := &p.Dialog; d.Nodes != d.Dialog.Nodes() || d.StepTokens != d.Dialog.StepTokens() {
		return fmt.Errorf("dialog %s: nodes %d, step_tokens %d, but its settings give %d and %d", d.Type, d.Nodes, d.StepTokens, d.Dialog.Nodes(), d.Dialog.StepTokens())
	}
	if d := &p.Dialog; (d.Type == SSD && d.PrefixKV != d.ForecastPrefix) || (d.Type != SSD && d.PrefixKV != 0) {
		return fmt.Errorf("dialog %s: prefix_kv %d does not match its forecast-prefix %d", d.Type, d.PrefixKV, d.ForecastPrefix)
	}
	if p.Dialog.ProbePromptTokens < 1 || p.Dialog.ProbePromptTokens > 1<<24 {
		return fmt.Errorf("dialog: probe_prompt_tokens %d, want 1…%d", p.Dialog.ProbePromptTokens, 1<<24)
	}
	switch p.Positional {
	case Rope, Absolute:
	default:
		return fmt.Errorf("unknown positional encoding %q", p.Positional)
	}
	switch model.RopeScalingType(p.Model.RopeScaling) {
	case model.RopeNoScaling, model.RopeLinear, model.RopeYarn, model.RopeLlama3:
	default:
		return fmt.Errorf("model: unknown rope_scaling %q (want linear, yarn or llama3)", p.Model.RopeScaling)
	}
	next := 0
	for i, s := range p.Stages {
		if s.Index != i {
			return fmt.Errorf("stage %d has index %d", i, s.Index)
		}
		if s.FirstLayer != next || s.LastLayer < s.FirstLayer || s.LastLayer >= p.Model.Layers {
			return fmt.Errorf("stage %d: layers %d…%d do not continue from layer %d within %d layers", i, s.FirstLayer, s.LastLayer, next, p.Model.Layers)
		}
		next = s.LastLayer + 1
	}
	if next != p.Model.Layers {
		return fmt.Errorf("stages cover layers 0…%d of %d", next-1, p.Model.Layers)
	}
	// Variants must carry the numbers their mode and the dialog give.
	want := &Plan{Dialog: p.Dialog, Variants: slices.Clone(p.Variants)}
	for i := range want.Variants {
		v := &want.Variants[i]
		if (v.Mode == ModeARc) != (v.AR == v.CL) || (v.Mode != ModeARc && v.Mode != ModeKV) {
			return fmt.Errorf("variant AR %d, CL %d: mode %q, want %q", v.AR, v.CL, v.Mode, map[bool]string{true: ModeARc, false: ModeKV}[v.AR == v.CL])
		}
	}
	want.fillSteps()
	for i, v := range want.Variants {
		if v != p.Variants[i] {
			return fmt.Errorf("variant AR %d, CL %d: mask_len %d, n_process %d, token_history %d, but the dialog gives %d, %d, %d",
				v.AR, v.CL, p.Variants[i].MaskLen, p.Variants[i].NProcess, p.Variants[i].TokenHistory, v.MaskLen, v.NProcess, v.TokenHistory)
		}
	}
	// Every graph has a unique safe name, belongs to a stage and a variant,
	// and is the only graph of its stage and variant; the stages list
	// exactly their graphs.
	graphs := map[string]*Graph{}
	shapes := map[[3]int]string{}
	for i := range p.Graphs {
		g := &p.Graphs[i]
		if err := CheckName("graph", g.Name); err != nil {
			return err
		}
		if graphs[g.Name] != nil {
			return fmt.Errorf("graph %s listed twice", g.Name)
		}
		graphs[g.Name] = g
		if g.Stage < 0 || g.Stage >= len(p.Stages) {
			return fmt.Errorf("graph %s: stage %d out of range", g.Name, g.Stage)
		}
		if !variants[[2]int{g.AR, g.CL}] {
			return fmt.Errorf("graph %s: AR %d, CL %d is not one of the plan's variants", g.Name, g.AR, g.CL)
		}
		key := [3]int{g.Stage, g.AR, g.CL}
		if prev, dup := shapes[key]; dup {
			return fmt.Errorf("graphs %s and %s: both stage %d with AR %d, CL %d", prev, g.Name, g.Stage, g.AR, g.CL)
		}
		shapes[key] = g.Name
	}
	for _, s := range p.Stages {
		for i, name := range s.Graphs {
			if g := graphs[name]; g == nil || g.Stage != s.Index || slices.Contains(s.Graphs[:i], name) {
				return fmt.Errorf("stage %d lists graph %q, which is not one of its graphs or is listed twice", s.Index, name)
			}
		}
		if len(s.Graphs) != len(p.Variants) {
			return fmt.Errorf("stage %d lists %d graphs, want one per variant (%d)", s.Index, len(s.Graphs), len(p.Variants))
		}
	}
	if len(p.Graphs) != len(p.Stages)*len(p.Variants) {
		return fmt.Errorf("%d graphs, want %d stages × %d variants", len(p.Graphs), len(p.Stages), len(p.Variants))
	}
	if err := p.validateDraft(); err != nil {
		return err
	}
	for _, g := range p.Graphs {
		if err := g.validShapes(); err != nil {
			return err
		}
	}
	return nil
}

// validShapes checks that every input and output of g has rank 1…8 and
// dimensions 1…2⁴⁰.
func (g *Graph) validShapes() error {
	for _, t := range append(g.Inputs[:len(g.Inputs):len(g.Inputs)], g.Outputs...) {
		if len(t.Shape) == 0 || len(t.Shape) > 8 {
			return fmt.Errorf("graph %s: tensor %q has rank %d", g.Name, t.Name, len(t.Shape))
		}
		for _, d := range t.Shape {
			if d <= 0 || d > 1<<40 {
				return fmt.Errorf("graph %s: tensor %q has dimension %d", g.Name, t.Name, d)
			}
		}
	}
	return nil
}

// width is the longest compact JSON kept on one line.
const width = 160

// indent pretty-prints compact JSON (as encoding/json writes it).
func indent(out *bytes.Buffer, v []byte, depth int) {
	if len(v) == 0 || (v[0] != '{' && v[0] != '[') || len(v) <= width || scalarArray(v) {
		out.Write(v)
		return
	}
	closer := byte('}')
	if v[0] == '[' {
		closer = ']'
	}
	elems := split(v[1 : len(v)-1])
	if len(elems) == 0 {
		out.Write(v)
		return
	}
	out.WriteByte(v[0])
	for i, e := range elems {
		out.WriteByte('\n')
		pad(out, depth+1)
		if v[0] == '{' {
			// "key":value — the key is a string without structure.
			k := keyEnd(e)
			out.Write(e[:k])
			out.WriteString(": ")
			e = e[k+1:]
		}
		indent(out, e, depth+1)
		if i < len(elems)-1 {
			out.WriteByte(',')
		}
	}
	out.WriteByte('\n')
	pad(out, depth)
	out.WriteByte(closer)
}

func pad(out *bytes.Buffer, depth int) {
	for range depth {
		out.WriteString("  ")
	}
}

// scalarArray reports whether v is an array with no objects or arrays inside.
func scalarArray(v []byte) bool {
	if v[0] != '[' {
		return false
	}
	return !bytes.ContainsAny(stripStrings(v[1:len(v)-1]), "{[")
}

// stripStrings blanks string contents so structure characters inside
// strings are not counted.
func stripStrings(v []byte) []byte {
	out := make([]byte, 0, len(v))
	in, esc := false, false
	for _, c := range v {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
			out = append(out, c)
		case !in:
			out = append(out, c)
		}
	}
	return out
}

// split cuts the inside of a compact object or array at top-level commas.
func split(v []byte) [][]byte {
	var parts [][]byte
	depth, start := 0, 0
	in, esc := false, false
	for i, c := range v {
		switch {
		case esc:
			esc = false
		case in:
			if c == '\\' {
				esc = true
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ',' && depth == 0:
			parts = append(parts, v[start:i])
			start = i + 1
		}
	}
	if len(v) > 0 {
		parts = append(parts, v[start:])
	}
	return parts
}

// keyEnd returns the index of the ':' after the leading string key.
func keyEnd(e []byte) int {
	esc := false
	for i := 1; i < len(e); i++ {
		switch {
		case esc:
			esc = false
		case e[i] == '\\':
			esc = true
		case e[i] == '"':
			return i + 1
		}
	}
	return len(e) - 1
}
