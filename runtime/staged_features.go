package runtime

import (
	"fmt"
	"slices"

	"github.com/qnnprep/qnnprep/shard"
)

// Drafter features through a plan. An EAGLE-3 head (or an MTP head) reads
// the target's hidden states at a few layers for every position the target
// processed (Drafter.FeatureLayers: layer l's input, the residual stream
// after layers [0, l)). A stage call already runs its layers one RunLayers
// call at a time (each layer loads its own cache surfaces), so the input
// of a layer inside a stage is the call's hidden states just before that
// layer runs: capturing it changes no arithmetic. At a stage boundary it is
// the stage's hidden_states_{k−1} input, after the last layer the head
// stage's last_hidden_states (when the graph has it). The features of a
// call's rows follow the rows through Commit: the selected new rows' join
// the committed ones, the rejected rows' are dropped with their KV.

// stagedFeatures is the feature state of a Staged.
type stagedFeatures struct {
	layers  []int       // feature layers, ascending; nil: capture nothing
	call    []float32   // the running call: [AR][len(layers)][hidden]
	pending [][]float32 // features of committed tokens not yet taken
}

// SetFeatureLayers makes every later call capture, for each of its rows,
// the concatenated inputs of layers (see Drafter.FeatureLayers: 0 is the
// embeddings, Layers the last layer's output), in ascending order; nil
// stops capturing. Commit keeps the features of the accepted rows, and
// TakeFeatures hands them out. Logits do not change.
func (s *Staged) SetFeatureLayers(layers []int) error {
	if s.step != nil {
		return fmt.Errorf("runtime: staged: feature layers changed with an uncommitted step")
	}
	if err := s.e.checkFeatureLayers(layers); err != nil {
		return err
	}
	s.feat.layers = slices.Clone(layers)
	if len(layers) == 0 {
		s.feat.layers = nil
	}
	s.feat.pending = nil
	return nil
}

// FeatureLayers returns the layers set by SetFeatureLayers.
func (s *Staged) FeatureLayers() []int { return slices.Clone(s.feat.layers) }

// TakeFeatures returns the features of the tokens committed since the
// last TakeFeatures (or Reset, or SetFeatureLayers), one row per token in
// sequence order, each len(FeatureLayers())·Hidden values, and forgets
// them. Without feature layers it returns nil.
func (s *Staged) TakeFeatures() [][]float32 {
	if s.feat.layers == nil {
		return nil
	}
	out := s.feat.pending
	if out == nil {
		out = [][]float32{}
	}
	s.feat.pending = nil
	return out
}

// captureFeatures records the input of layer l for the rows of the running
// call on variant v, stage k, whose hidden states are x ([AR][hidden]): at
// the stage's first layer it reads the stage's hidden_states input, after
// the last layer last_hidden_states when the graph has it; both hold x.
func (s *Staged) captureFeatures(v *stagedVariant, k, l int, x []float32) {
	f := &s.feat
	if !slices.Contains(f.layers, l) {
		return
	}
	h, nf := s.e.cfg.Hidden, len(f.layers)
	buf := grow(&f.call, v.ar*nf*h)
	src := x
	switch st := &s.p.Stages[k]; {
	case l == st.FirstLayer && k > 0:
		src = v.f(shard.HiddenStates(k - 1))
	case l == s.e.cfg.Layers && v.bufs[shard.LastHiddenStates] != nil:
		src = v.f(shard.LastHiddenStates)
	}
	for j, fl := range f.layers {
		if fl != l {
			continue
		}
		for r := 0; r < v.ar; r++ {
			copy(buf[(r*nf+j)*h:(r*nf+j+1)*h], src[r*h:(r+1)*h])
		}
	}
}

// callFeatures returns the captured features of the call's first n rows.
func (s *Staged) callFeatures(n int) [][]float32 {
	f := &s.feat
	if f.layers == nil {
		return nil
	}
	w := len(f.layers) * s.e.cfg.Hidden
	flat := slices.Clone(f.call[:n*w])
	rows := make([][]float32, n)
	for r := range rows {
		rows[r] = flat[r*w : (r+1)*w : (r+1)*w]
	}
	return rows
}
