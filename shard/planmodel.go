package shard

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// Sizes are the weight bytes a plan is made from, as PlanModel measures
// them from a model's tensors.
type Sizes struct {
	Layers     []int64     // per layer: every blk.N.* tensor
	Embed      int64       // token_embd and any tensor outside the layers and the head
	Head       int64       // output_norm, output (token_embd again when tied) and blocks past Layers (MTP)
	LayerTypes []gguf.Type // per layer: the lowest-bit type among its matrices
}

// ModelSizes measures m's tensors for NewPlan.
func ModelSizes(m *model.Model) (Sizes, error) {
	n := m.Config.Layers
	s := Sizes{Layers: make([]int64, n), LayerTypes: make([]gguf.Type, n)}
	have := make([]bool, n)
	for _, t := range m.Tensors {
		b := t.Bytes()
		if b < 0 {
			return s, fmt.Errorf("shard: %s: tensor %q has no valid size (type %s, dims %v)", m.Path, t.Name, t.Type, t.Dims)
		}
		switch {
		case strings.HasPrefix(t.Name, "blk."):
			rest := strings.TrimPrefix(t.Name, "blk.")
			dot := strings.IndexByte(rest, '.')
			l, err := strconv.Atoi(rest[:max(dot, 0)])
			if dot < 0 || err != nil || l < 0 {
				return s, fmt.Errorf("shard: %s: tensor %q: no layer number after blk.", m.Path, t.Name)
			}
			if l >= n { // e.g. MTP blocks, which run after the last layer
				s.Head += b
				continue
			}
			s.Layers[l] += b
			if len(t.Dims) >= 2 && t.Rows() > 1 {
				if !have[l] || t.Type.BitsPerWeight() < s.LayerTypes[l].BitsPerWeight() {
					s.LayerTypes[l], have[l] = t.Type, true
				}
			}
		case t.Name == "output.weight" || strings.HasPrefix(t.Name, "output_norm."):
			s.Head += b
		default:
			s.Embed += b
			if t.Name == "token_embd.weight" && m.Config.TiedEmbeddings {
				s.Head += b
			}
		}
	}
	for l := range have {
		if !have[l] {
			s.LayerTypes = nil // some layer without matrices: type unknown
			break
		}
	}
	return s, nil
}

// PlanModel plans m, measuring the bytes of its tensors. The plan's name is
// general.name, or the file or directory name.
func PlanModel(m *model.Model, opts Options) (*Plan, error) {
	s, err := ModelSizes(m)
	if err != nil {
		return nil, err
	}
	if opts.LayerTypes == nil {
		opts.LayerTypes = s.LayerTypes
	}
	return NewPlan(m.Config, s.Layers, s.Head, s.Embed, ModelName(m), opts)
}

// ModelName is general.name, or the base name of m's path without extension.
func ModelName(m *model.Model) string {
	if name, ok := m.Metadata.String("general.name"); ok && strings.TrimSpace(name) != "" {
		return name
	}
	base := filepath.Base(filepath.Clean(m.Path))
	if base == "." || base == string(filepath.Separator) || base == "" {
		return "model"
	}
	return strings.TrimSuffix(base, filepath.Ext(base))
}
