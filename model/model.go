package model

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
)

// Model is a model in canonical form: a Config and its tensors under
// llama.cpp GGUF names, whatever file they came from.
type Model struct {
	Path   string
	Format string // "gguf" | "safetensors" ("" for New)
	Config Config
	// Tensors in canonical order (ExpectedTensors): token_embd, blk.0.*,
	// …, output_norm, output.
	Tensors []*Tensor
	// Metadata is the GGUF file's key/value pairs for a GGUF model, and
	// GGUFMetadata() for a Hugging Face or in-memory model.
	Metadata gguf.Metadata

	name   string // general.name
	byName map[string]*Tensor
	close  func() error
}

// Open opens a GGUF file or a Hugging Face model directory (config.json
// plus safetensors). It reads only headers: tensor data is mapped and
// transformed when asked for. The tensor set is checked against the
// config first, and every missing, unexpected or misshapen tensor is
// listed by name in one error.
func Open(path string) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if st.IsDir() {
		return openHF(path)
	}
	if base := filepath.Base(path); base == "config.json" || strings.HasSuffix(base, ".safetensors") ||
		base == "model.safetensors.index.json" {
		return openHF(filepath.Dir(path))
	}
	return openGGUF(path)
}

// New makes a model from a config and tensors, checked like Open checks a
// file. The tensors may come in any order; the model holds them in
// canonical order. A missing rope_freqs.weight is made from
// cfg.RopeFreqFactors.
func New(cfg Config, tensors []*Tensor) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	byName := make(map[string]*Tensor, len(tensors))
	var problems []string
	for _, t := range tensors {
		if t == nil {
			problems = append(problems, "nil tensor")
			continue
		}
		if byName[t.Name] != nil {
			problems = append(problems, "duplicate tensor "+t.Name)
			continue
		}
		byName[t.Name] = t
	}
	if f := cfg.RopeFreqFactors; len(f) > 0 && byName["rope_freqs.weight"] == nil {
		byName["rope_freqs.weight"] = NewTensor("rope_freqs.weight", []int64{int64(len(f))}, gguf.F32, encodeFloat32(f))
	}
	ordered, problems := arrange(cfg, byName, nil, problems)
	if err := problemError("", problems); err != nil {
		return nil, err
	}
	m := &Model{Config: cfg, Tensors: ordered}
	m.index()
	m.Metadata = m.GGUFMetadata()
	return m, nil
}

// Tensor returns the tensor with the canonical name, or nil.
func (m *Model) Tensor(name string) *Tensor {
	if m.byName == nil {
		m.index()
	}
	return m.byName[name]
}

func (m *Model) index() {
	m.byName = make(map[string]*Tensor, len(m.Tensors))
	for _, t := range m.Tensors {
		m.byName[t.Name] = t
	}
}

// Close releases the files behind the model. Tensor data is invalid
// afterwards.
func (m *Model) Close() error {
	if m.close == nil {
		return nil
	}
	err := m.close()
	m.close = nil
	return err
}

// arrange checks the tensors against ExpectedTensors(cfg) and returns them
// in canonical order with the problems found: missing (unless a source
// tensor was already reported for that name in skip), unexpected and
// misshapen tensors, and tensors whose type does not fit their dims.
func arrange(cfg Config, byName map[string]*Tensor, skip map[string]bool, problems []string) ([]*Tensor, []string) {
	specs := ExpectedTensors(cfg)
	used := make(map[string]bool, len(specs))
	out := make([]*Tensor, 0, len(specs))
	for _, s := range specs {
		used[s.Name] = true
		t := byName[s.Name]
		if t == nil {
			if !s.Optional && !skip[s.Name] {
				problems = append(problems, "missing "+s.Name)
			}
			continue
		}
		if t.bad != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", t.where(), t.bad))
			continue
		}
		if !slices.Equal(t.Dims, s.Dims) {
			problems = append(problems, fmt.Sprintf("%s has shape %v, expected %v", t.where(), t.Dims, s.Dims))
			continue
		}
		if _, err := t.size(); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", t.where(), err))
			continue
		}
		out = append(out, t)
	}
	var extra []string
	for name, t := range byName {
		if !used[name] {
			extra = append(extra, "unexpected tensor "+t.where())
		}
	}
	sort.Strings(extra)
	return out, append(problems, extra...)
}

// maxListed caps the problems spelled out in one error; a file for a
// different config can have thousands.
const maxListed = 100

func problemError(where string, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	list := problems
	more := ""
	if len(list) > maxListed {
		more = fmt.Sprintf("; and %d more", len(list)-maxListed)
		list = list[:maxListed]
	}
	noun := "problems"
	if len(problems) == 1 {
		noun = "problem"
	}
	prefix := "model: "
	if where != "" {
		prefix += where + ": "
	}
	return fmt.Errorf("%s%d %s: %s%s", prefix, len(problems), noun, strings.Join(list, "; "), more)
}
