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

// validate checks what Check and the exporters index by, so a hand-edited
// plan fails here with a message rather than deeper down.
func (p *Plan) validate() error {
	if len(p.Stages) == 0 {
		return errors.New("no stages")
	}
	if p.Model.Layers <= 0 || len(p.Model.LayerKinds) != p.Model.Layers {
		return fmt.Errorf("model has %d layers but %d layer kinds", p.Model.Layers, len(p.Model.LayerKinds))
	}
	for i, k := range p.Model.LayerKinds {
		if k != "attention" && k != "deltanet" {
			return fmt.Errorf("layer %d: unknown kind %q, want attention or deltanet", i, k)
		}
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
	for _, g := range p.Graphs {
		if g.Stage < 0 || g.Stage >= len(p.Stages) {
			return fmt.Errorf("graph %s: stage %d out of range", g.Name, g.Stage)
		}
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
