package runtime

import (
	"fmt"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// Eagle3 GGUF metadata keys: llama.cpp's EAGLE-3 layout (general.architecture
// "eagle3"; the Llama key names under the eagle3 prefix, plus the head's
// own; llama.cpp src/models/eagle3.cpp, conversion/llama.py).
const (
	Eagle3Arch = "eagle3"
	// KeyEagle3TargetLayers lists the three target layers whose inputs
	// are the features (INT32 array).
	KeyEagle3TargetLayers = "eagle3.target_layers"
	// KeyEagle3ExtractLayers is the older name of KeyEagle3TargetLayers,
	// still read.
	KeyEagle3ExtractLayers   = "eagle3.extract_layers"
	KeyEagle3TargetHidden    = "eagle3.target_hidden_size"
	KeyEagle3NormBeforeResid = "eagle3.norm_before_residual"
	// KeyEagle3NormBeforeFC marks heads that RMS-normalise the features
	// before fc (enc.output_norm.weight); the runtime does not run them.
	KeyEagle3NormBeforeFC = "eagle3.norm_before_fc"
)

// Eagle3Metadata returns the GGUF metadata describing cfg, as LoadEagle3
// reads it.
func Eagle3Metadata(cfg Eagle3Config) gguf.Metadata {
	var md gguf.Metadata
	md.Set("general.architecture", Eagle3Arch)
	md.Set("eagle3.embedding_length", uint32(cfg.Hidden))
	md.Set("eagle3.feed_forward_length", uint32(cfg.FFN))
	md.Set("eagle3.block_count", uint32(1))
	md.Set("eagle3.attention.head_count", uint32(cfg.Heads))
	md.Set("eagle3.attention.head_count_kv", uint32(cfg.KVHeads))
	md.Set("eagle3.attention.key_length", uint32(cfg.HeadDim))
	md.Set("eagle3.attention.value_length", uint32(cfg.HeadDim))
	md.Set("eagle3.attention.layer_norm_rms_epsilon", cfg.RMSEps)
	md.Set("eagle3.rope.freq_base", cfg.RopeTheta)
	md.Set("eagle3.rope.dimension_count", uint32(cfg.HeadDim))
	if cfg.ContextLength > 0 {
		md.Set("eagle3.context_length", uint32(cfg.ContextLength))
	}
	md.Set(KeyEagle3TargetLayers, []int32{int32(cfg.ExtractLayers[0]), int32(cfg.ExtractLayers[1]), int32(cfg.ExtractLayers[2])})
	md.Set(KeyEagle3TargetHidden, uint32(cfg.TargetHidden))
	md.Set(KeyEagle3NormBeforeResid, cfg.NormBeforeResidual)
	return md
}

// LoadEagle3 opens an EAGLE-3 head stored as GGUF (architecture eagle3)
// for target. The file stays mapped until Close.
func LoadEagle3(target *Engine, path string) (*Eagle3, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	h, err := eagle3FromGGUF(target, f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	h.closer = f.Close
	return h, nil
}

func eagle3FromGGUF(target *Engine, f *gguf.File) (*Eagle3, error) {
	md := f.Metadata
	if a, _ := md.String("general.architecture"); a != Eagle3Arch {
		return nil, fmt.Errorf("general.architecture is %q, want %q (an EAGLE-3 draft head)", a, Eagle3Arch)
	}
	geti := func(key string, def int, required bool) (int, error) {
		v, ok := md.Int(key)
		if !ok {
			if required {
				return 0, fmt.Errorf("missing metadata key %s", key)
			}
			return def, nil
		}
		if v <= 0 || v > 1<<24 {
			return 0, fmt.Errorf("metadata %s = %d out of range", key, v)
		}
		return int(v), nil
	}
	var cfg Eagle3Config
	var err error
	if cfg.Hidden, err = geti("eagle3.embedding_length", 0, true); err != nil {
		return nil, err
	}
	if cfg.FFN, err = geti("eagle3.feed_forward_length", 0, true); err != nil {
		return nil, err
	}
	if cfg.Heads, err = geti("eagle3.attention.head_count", 0, true); err != nil {
		return nil, err
	}
	if cfg.KVHeads, err = geti("eagle3.attention.head_count_kv", cfg.Heads, false); err != nil {
		return nil, err
	}
	if cfg.HeadDim, err = geti("eagle3.attention.key_length", cfg.Hidden/cfg.Heads, false); err != nil {
		return nil, err
	}
	if cfg.TargetHidden, err = geti(KeyEagle3TargetHidden, target.cfg.Hidden, false); err != nil {
		return nil, err
	}
	if v, ok := md.Float("eagle3.attention.layer_norm_rms_epsilon"); ok {
		cfg.RMSEps = float32(v)
	}
	if v, ok := md.Float("eagle3.rope.freq_base"); ok {
		cfg.RopeTheta = float32(v)
	}
	cfg.NormBeforeResidual, _ = md.Bool(KeyEagle3NormBeforeResid)
	if v, _ := md.Bool(KeyEagle3NormBeforeFC); v {
		return nil, fmt.Errorf("metadata %s is true: heads that normalise the features before fc are not supported", KeyEagle3NormBeforeFC)
	}
	key := KeyEagle3TargetLayers
	if _, ok := md.Get(key); !ok {
		key = KeyEagle3ExtractLayers
	}
	if ls, ok := md.Int32s(key); ok {
		if len(ls) != 3 {
			return nil, fmt.Errorf("metadata %s has %d layers, want 3", key, len(ls))
		}
		cfg.ExtractLayers = [3]int{int(ls[0]), int(ls[1]), int(ls[2])}
	} else if _, ok := md.Get(key); ok {
		return nil, fmt.Errorf("metadata %s: want an array of 3 integers", key)
	} else {
		cfg.ExtractLayers = DefaultExtractLayers(target.cfg.Layers)
	}
	// The draft vocabulary is the lm_head's row count.
	ti, ok := f.Tensor(e3Head)
	if !ok || len(ti.Dims) != 2 || ti.Dims[1] <= 0 || ti.Dims[1] > 1<<24 {
		return nil, fmt.Errorf("tensor %q missing or not a matrix", e3Head)
	}
	cfg.DraftVocab = int(ti.Dims[1])
	tensors := make([]*model.Tensor, 0, len(f.Tensors))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.Data(ti)
		if err != nil {
			return nil, err
		}
		tensors = append(tensors, model.NewTensor(ti.Name, ti.Dims, ti.Type, data))
	}
	return NewEagle3(target, cfg, tensors)
}
