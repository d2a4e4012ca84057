// Package quantize turns a canonical model into a qmodel: it decides each
// tensor's type from a recipe, quantizes tensor by tensor with a bounded
// number in flight, and writes one GGUF that llama.cpp can read.
package quantize

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
)

// Kind is a target encoding. It is a ggml type plus, for Q8_0, whether the
// scale is per output channel (every block of a row carries the row's
// scale, which is what QNN's per-channel INT8 needs) or per block.
type Kind struct {
	Type       gguf.Type
	PerChannel bool // only with Q8_0
}

func (k Kind) String() string {
	if k.PerChannel {
		return "INT8"
	}
	return k.Type.String()
}

// ParseKind accepts any ggml type name, and "int8" for per-channel Q8_0.
func ParseKind(s string) (Kind, error) {
	if strings.EqualFold(s, "int8") {
		return Kind{Type: gguf.Q8_0, PerChannel: true}, nil
	}
	t, err := gguf.ParseType(s)
	if err != nil {
		return Kind{}, err
	}
	if !Encodable(t) {
		return Kind{}, fmt.Errorf("type %s cannot be produced by qnnprep (encodable: %s)", t, strings.Join(encodableNames(), ", "))
	}
	return Kind{Type: t}, nil
}

// Encodable reports whether qnnprep can write tensors of type t.
func Encodable(t gguf.Type) bool {
	switch t {
	case gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q1_0, gguf.Q2_0:
		return true
	}
	return false
}

func encodableNames() []string {
	return []string{"F32", "F16", "BF16", "Q8_0", "int8", "Q1_0", "Q2_0"}
}

// Rule assigns a kind to every tensor whose canonical name matches Pattern
// (a path.Match glob; '*' also matches dots, e.g. "blk.*.ffn_down.weight").
type Rule struct {
	Pattern string
	Kind    Kind
}

// Recipe says how each tensor of a model is stored.
//
// Order of decision for a tensor: the first matching override, then the
// first matching recipe rule, then Matrix for 2-D tensors and F32 for
// everything else. A recipe's own choice that does not fit the row length
// walks Fallback (Q1_0 → Q8_0 → F16, for example); an override that does not
// fit is an error, because the user asked for exactly that type.
type Recipe struct {
	Name        string
	Description string
	Matrix      Kind // 2-D weights not matched by a rule
	Rules       []Rule
	Fallback    map[gguf.Type]gguf.Type
	// Keep stores every tensor in its source type: a lossless conversion.
	Keep bool
}

var f32 = Kind{Type: gguf.F32}

// Recipes lists the built-in recipes by name.
var Recipes = map[string]*Recipe{
	"q1": {
		Name:        "q1",
		Description: "1-bit Q1_0 matrices (1.125 bpw), vocabulary head Q2_0 (2.25 bpw), embeddings Q1_0 unless tied to the head, DeltaNet gates Q8_0",
		Matrix:      Kind{Type: gguf.Q1_0},
		Rules: []Rule{
			{"output.weight", Kind{Type: gguf.Q2_0}},
			{"*.ssm_conv1d.weight", f32},
			{"*.ssm_alpha.weight", Kind{Type: gguf.Q8_0}},
			{"*.ssm_beta.weight", Kind{Type: gguf.Q8_0}},
		},
		Fallback: map[gguf.Type]gguf.Type{gguf.Q1_0: gguf.Q8_0, gguf.Q2_0: gguf.Q8_0, gguf.Q8_0: gguf.F16},
	},
	"int8": {
		Name:        "int8",
		Description: "INT8 symmetric per output channel (stored as Q8_0 whose blocks share the row scale)",
		Matrix:      Kind{Type: gguf.Q8_0, PerChannel: true},
		Rules:       []Rule{{"*.ssm_conv1d.weight", f32}},
		Fallback:    map[gguf.Type]gguf.Type{gguf.Q8_0: gguf.F16},
	},
	"q8_0": {
		Name:        "q8_0",
		Description: "INT8 per block of 32 (plain ggml Q8_0)",
		Matrix:      Kind{Type: gguf.Q8_0},
		Rules:       []Rule{{"*.ssm_conv1d.weight", f32}},
		Fallback:    map[gguf.Type]gguf.Type{gguf.Q8_0: gguf.F16},
	},
	"f16": {
		Name:        "f16",
		Description: "matrices F16, everything else F32",
		Matrix:      Kind{Type: gguf.F16},
		Rules:       []Rule{{"*.ssm_conv1d.weight", f32}},
	},
	"keep": {
		Name:        "keep",
		Description: "every tensor in its source type (lossless conversion)",
		Keep:        true,
	},
	"bf16": {
		Name:        "bf16",
		Description: "matrices BF16, everything else F32",
		Matrix:      Kind{Type: gguf.BF16},
		Rules:       []Rule{{"*.ssm_conv1d.weight", f32}},
	},
}

// RecipeNames returns the built-in recipe names, sorted.
func RecipeNames() []string {
	var names []string
	for n := range Recipes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupRecipe returns the named built-in recipe.
func LookupRecipe(name string) (*Recipe, error) {
	r, ok := Recipes[name]
	if !ok {
		return nil, fmt.Errorf("unknown recipe %q (known: %s)", name, strings.Join(RecipeNames(), ", "))
	}
	return r, nil
}

// ParseOverride parses "PATTERN=TYPE".
func ParseOverride(s string) (Rule, error) {
	pat, typ, ok := strings.Cut(s, "=")
	if !ok || pat == "" || typ == "" {
		return Rule{}, fmt.Errorf("override %q: want PATTERN=TYPE, e.g. 'blk.*.ffn_down.weight=Q8_0'", s)
	}
	if _, err := path.Match(pat, ""); err != nil {
		return Rule{}, fmt.Errorf("override %q: bad pattern: %w", s, err)
	}
	k, err := ParseKind(typ)
	if err != nil {
		return Rule{}, fmt.Errorf("override %q: %w", s, err)
	}
	return Rule{Pattern: pat, Kind: k}, nil
}

// TensorShape is what the recipe needs to know about a tensor.
type TensorShape struct {
	Name string
	Dims []int64 // ggml order; Dims[0] is the row length
	Type gguf.Type
}

// Decision is the outcome for one tensor.
type Decision struct {
	Name     string
	Kind     Kind
	Wanted   Kind   // what the recipe asked for, before any fallback
	Reason   string // which rule decided, and why a fallback was taken
	Copy     bool   // the source already has this exact encoding: copy bytes
	Fallback bool
}

// Decide assigns a kind to every tensor. It fails, before anything is
// written, on an override pattern that matches nothing and on an override
// whose type does not fit a matched tensor's rows.
func (r *Recipe) Decide(tensors []TensorShape, overrides []Rule, tied bool) ([]Decision, error) {
	used := make([]bool, len(overrides))
	f32Only := make([][]string, len(overrides)) // tensors a glob matched but could not change
	var problems []string
	out := make([]Decision, len(tensors))
	for i, t := range tensors {
		d := Decision{Name: t.Name}
		matched := false
		for j, o := range overrides {
			if ok, _ := path.Match(o.Pattern, t.Name); ok {
				if why := staysF32(t); why != "" && o.Kind.Type != gguf.F32 {
					// A glob skips the tensor (a broad pattern is meant
					// for the matrices it covers); naming the tensor
					// exactly is an error.
					if !isGlob(o.Pattern) {
						used[j] = true
						problems = append(problems, fmt.Sprintf("override %s=%s: tensor %s must stay F32: %s",
							o.Pattern, o.Kind, t.Name, why))
					} else if !used[j] {
						f32Only[j] = append(f32Only[j], t.Name+" ("+why+")")
					}
					continue
				}
				used[j] = true
				d.Kind, d.Wanted, d.Reason, matched = o.Kind, o.Kind, "override "+o.Pattern, true
				if !fits(o.Kind.Type, t.Dims) {
					problems = append(problems, fmt.Sprintf("override %s=%s: tensor %s has rows of %d, not a multiple of %s's block of %d",
						o.Pattern, o.Kind, t.Name, t.Dims[0], o.Kind.Type, o.Kind.Type.BlockSize()))
				}
				break
			}
		}
		if !matched {
			d.Wanted, d.Reason = r.choose(t, tied)
			d.Kind = d.Wanted
			for !fits(d.Kind.Type, t.Dims) {
				next, ok := r.Fallback[d.Kind.Type]
				if !ok {
					problems = append(problems, fmt.Sprintf("tensor %s: rows of %d do not fit %s (block %d) and recipe %s has no fallback for it",
						t.Name, t.Dims[0], d.Kind.Type, d.Kind.Type.BlockSize(), r.Name))
					break
				}
				d.Fallback = true
				d.Reason += fmt.Sprintf("; rows of %d do not fit %s, fell back to %s", t.Dims[0], d.Kind.Type, next)
				d.Kind = Kind{Type: next, PerChannel: d.Kind.PerChannel && next == gguf.Q8_0}
			}
		}
		// Re-encoding Q1_0/Q2_0/Q8_0 would lose nothing but time; copying
		// is also the only way to guarantee the codes stay identical.
		d.Copy = (r.Keep && !matched) || t.Type == d.Kind.Type && !d.Kind.PerChannel &&
			(t.Type == gguf.Q1_0 || t.Type == gguf.Q2_0 || t.Type == gguf.Q8_0 || t.Type == gguf.F32 || t.Type == gguf.F16 || t.Type == gguf.BF16)
		out[i] = d
	}
	for j, o := range overrides {
		switch {
		case used[j]:
		case len(f32Only[j]) > 0:
			problems = append(problems, fmt.Sprintf("override %s=%s matches only tensors that must stay F32: %s",
				o.Pattern, o.Kind, strings.Join(f32Only[j], "; ")))
		default:
			problems = append(problems, fmt.Sprintf("override %s=%s matches no tensor", o.Pattern, o.Kind))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("recipe %s: %s", r.Name, strings.Join(problems, "; "))
	}
	return out, nil
}

// staysF32 says why llama.cpp needs t in F32, or "" if it may take any
// type. llama.cpp's quantizer never converts tensors of fewer than two
// dimensions, *_norm.weight or ssm_conv1d.weight, and the CPU kernels that
// use them (the norm multiply, ssm_conv) take only F32: another type
// makes a file llama.cpp aborts on.
func staysF32(t TensorShape) string {
	switch {
	case strings.HasSuffix(t.Name, "_norm.weight"):
		return "llama.cpp reads norm weights only as F32"
	case strings.HasSuffix(t.Name, ".ssm_conv1d.weight"):
		return "llama.cpp's ssm_conv reads its kernel only as F32"
	case nDims(t.Dims) < 2:
		return "llama.cpp keeps 1-D tensors (norms, biases, rope factors) in F32"
	}
	return ""
}

// nDims is ggml_n_dims: trailing dimensions of 1 do not count.
func nDims(dims []int64) int {
	n := len(dims)
	for n > 1 && dims[n-1] == 1 {
		n--
	}
	return n
}

// isGlob reports whether an override pattern has path.Match wildcards.
func isGlob(pattern string) bool { return strings.ContainsAny(pattern, `*?[\`) }

func (r *Recipe) choose(t TensorShape, tied bool) (Kind, string) {
	if r.Keep {
		return Kind{Type: t.Type}, "kept in its source type"
	}
	for _, rule := range r.Rules {
		if ok, _ := path.Match(rule.Pattern, t.Name); ok {
			return rule.Kind, "recipe rule " + rule.Pattern
		}
	}
	if len(t.Dims) < 2 || t.Dims[1] == 1 {
		return f32, "1-D tensors stay F32"
	}
	// A tied embedding is also the vocabulary head: it gets the head's type.
	if tied && t.Name == "token_embd.weight" {
		for _, rule := range r.Rules {
			if rule.Pattern == "output.weight" {
				return rule.Kind, "tied embedding takes the head's rule output.weight"
			}
		}
	}
	return r.Matrix, "recipe " + r.Name + " matrices"
}

func fits(t gguf.Type, dims []int64) bool {
	if len(dims) == 0 {
		return false
	}
	_, err := t.RowBytes(dims[0])
	return err == nil
}
