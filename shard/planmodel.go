package shard

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// Sizes are the weight bytes a plan is made from, as ModelSizes measures
// them from a model's tensors: on the device (what the exported graphs
// declare, in Container) and in the qmodel file.
type Sizes struct {
	Container Container // the container the device sizes were measured in; 0 means 4bit
	Layers    []int64   // device bytes per layer: every blk.N.* tensor
	Embed     int64     // device bytes of token_embd
	Head      int64     // device bytes of output_norm and output (token_embd again when tied)

	// The same parts' bytes in the qmodel; QLayers is nil when unknown.
	// QEmbed also counts tensors outside the layers and the head, and
	// QHead blocks past Layers (MTP), which no stage graph exports.
	QLayers       []int64
	QEmbed, QHead int64

	LayerTypes []gguf.Type // per layer: the lowest-bit type among its matrices
}

// ModelSizes measures m's tensors for NewPlan, on the device in container c
// (0 means 4bit; see WeightLayout) and in the file.
func ModelSizes(m *model.Model, c Container) (Sizes, error) {
	if c == 0 {
		c = Container4Bit
	}
	n := m.Config.Layers
	s := Sizes{Container: c, Layers: make([]int64, n), QLayers: make([]int64, n), LayerTypes: make([]gguf.Type, n)}
	have := make([]bool, n)
	for _, t := range m.Tensors {
		b := t.Bytes()
		if b < 0 {
			return s, fmt.Errorf("shard: %s: tensor %q has no valid size (type %s, dims %v)", m.Path, t.Name, t.Type, t.Dims)
		}
		dev := func() (int64, error) {
			d, err := DeviceBytes(t, c)
			if err != nil {
				return 0, fmt.Errorf("shard: %s: %w", m.Path, err)
			}
			return d, nil
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
				s.QHead += b
				continue
			}
			d, err := dev()
			if err != nil {
				return s, err
			}
			s.Layers[l] += d
			s.QLayers[l] += b
			if len(t.Dims) >= 2 && t.Rows() > 1 {
				if !have[l] || t.Type.BitsPerWeight() < s.LayerTypes[l].BitsPerWeight() {
					s.LayerTypes[l], have[l] = t.Type, true
				}
			}
		case t.Name == "output.weight" || strings.HasPrefix(t.Name, "output_norm."):
			d, err := dev()
			if err != nil {
				return s, err
			}
			s.Head += d
			s.QHead += b
		case t.Name == "token_embd.weight":
			d, err := dev()
			if err != nil {
				return s, err
			}
			s.Embed += d
			s.QEmbed += b
			if m.Config.TiedEmbeddings {
				// The export declares the tied head as a second initializer.
				s.Head += d
				s.QHead += b
			}
		default:
			s.QEmbed += b
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

// PlanModel plans m, measuring the bytes of its tensors in opts.Container. The plan's name is
// general.name, or the file or directory name.
func PlanModel(m *model.Model, opts Options) (*Plan, error) {
	s, err := ModelSizes(m, opts.Container)
	if err != nil {
		return nil, err
	}
	return NewPlan(m.Config, s, ModelName(m), opts)
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
