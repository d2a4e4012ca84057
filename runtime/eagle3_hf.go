package runtime

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/safetensors"
)

// eagle3HFConfig is the part of an EAGLE-3 config.json the head needs:
// SafeAILab/SpecForge (LlamaForCausalLMEagle3) fields at the top level,
// or the speculators format with them under transformer_layer_config.
type eagle3HFConfig struct {
	HiddenSize         int             `json:"hidden_size"`
	IntermediateSize   int             `json:"intermediate_size"`
	Heads              int             `json:"num_attention_heads"`
	KVHeads            int             `json:"num_key_value_heads"`
	HeadDim            int             `json:"head_dim"`
	RMSEps             float64         `json:"rms_norm_eps"`
	RopeTheta          float64         `json:"rope_theta"`
	RopeScaling        json.RawMessage `json:"rope_scaling"`
	MaxPositions       int             `json:"max_position_embeddings"`
	DraftVocab         int             `json:"draft_vocab_size"`
	TargetHidden       int             `json:"target_hidden_size"`
	NormBeforeResidual bool            `json:"norm_before_residual"`
	NormBeforeFC       bool            `json:"norm_before_fc"`
	AuxLayers          []int           `json:"eagle_aux_hidden_state_layer_ids"`
	EagleConfig        *struct {
		AuxLayers []int `json:"eagle_aux_hidden_state_layer_ids"`
	} `json:"eagle_config"`
	Layer *eagle3HFConfig `json:"transformer_layer_config"`
}

// LoadEagle3HF opens an EAGLE-3 head in Hugging Face form (a directory
// with config.json and safetensors; SafeAILab "midlayer.*" or speculators
// "layers.0.*" names) for target. q and k keep the checkpoint's order and
// are rotated NEOX-style; d2t offsets become absolute target ids.
func LoadEagle3HF(target *Engine, dir string) (*Eagle3, error) {
	cfg, err := readEagle3HFConfig(dir, target.cfg.Layers)
	if err != nil {
		return nil, err
	}
	cfg.ContextLength = 0 // the target's (max_position_embeddings only goes into a GGUF)
	st, err := safetensors.Open(dir)
	if err != nil {
		return nil, err
	}
	h, err := eagle3FromHF(target, cfg, st)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	h.closer = st.Close
	return h, nil
}

// readEagle3HFConfig reads an EAGLE-3 head's config.json. The feature
// layers default to DefaultExtractLayers(targetLayers); targetLayers 0
// makes them required.
func readEagle3HFConfig(dir string, targetLayers int) (Eagle3Config, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return Eagle3Config{}, err
	}
	return parseEagle3HFConfig(b, dir, targetLayers)
}

// parseEagle3HFConfig is readEagle3HFConfig on config.json's bytes b;
// dir names the head in errors.
func parseEagle3HFConfig(b []byte, dir string, targetLayers int) (Eagle3Config, error) {
	var hc eagle3HFConfig
	if err := json.Unmarshal(b, &hc); err != nil {
		return Eagle3Config{}, fmt.Errorf("%s: config.json: %w", dir, err)
	}
	top := hc
	if hc.Layer != nil {
		lc := *hc.Layer
		lc.DraftVocab = max(lc.DraftVocab, hc.DraftVocab)
		lc.TargetHidden = max(lc.TargetHidden, hc.TargetHidden)
		lc.NormBeforeResidual = lc.NormBeforeResidual || hc.NormBeforeResidual
		lc.NormBeforeFC = lc.NormBeforeFC || hc.NormBeforeFC
		hc = lc
	}
	if len(hc.RopeScaling) > 0 && string(hc.RopeScaling) != "null" {
		return Eagle3Config{}, fmt.Errorf("%s: config.json: rope_scaling %s is not supported for EAGLE-3 heads", dir, hc.RopeScaling)
	}
	if hc.NormBeforeFC {
		return Eagle3Config{}, fmt.Errorf("%s: config.json: norm_before_fc (features normalised before fc) is not supported", dir)
	}
	cfg := Eagle3Config{
		Hidden: hc.HiddenSize, FFN: hc.IntermediateSize, Heads: hc.Heads, KVHeads: hc.KVHeads, HeadDim: hc.HeadDim,
		DraftVocab: hc.DraftVocab, TargetHidden: hc.TargetHidden, RMSEps: float32(hc.RMSEps), RopeTheta: float32(hc.RopeTheta),
		NormBeforeResidual: hc.NormBeforeResidual, RopeNeox: true, ContextLength: hc.MaxPositions,
	}
	if cfg.KVHeads == 0 {
		cfg.KVHeads = cfg.Heads
	}
	if cfg.HeadDim == 0 && cfg.Heads > 0 {
		cfg.HeadDim = cfg.Hidden / cfg.Heads
	}
	// convert writes a GGUF from these sizes before NewEagle3 would
	// check them (a zero head_dim divided the q/k permutation).
	for _, v := range []struct {
		key string
		n   int
	}{{"hidden_size", cfg.Hidden}, {"intermediate_size", cfg.FFN}, {"num_attention_heads", cfg.Heads},
		{"num_key_value_heads", cfg.KVHeads}, {"head_dim", cfg.HeadDim}} {
		if v.n <= 0 || v.n > 1<<24 {
			return cfg, fmt.Errorf("%s: config.json: %s %d, want 1…%d", dir, v.key, v.n, 1<<24)
		}
	}
	if cfg.DraftVocab < 0 || cfg.TargetHidden < 0 || cfg.DraftVocab > 1<<24 || cfg.TargetHidden > 1<<24 {
		return cfg, fmt.Errorf("%s: config.json: draft_vocab_size %d, target_hidden_size %d, want 0…%d", dir, cfg.DraftVocab, cfg.TargetHidden, 1<<24)
	}
	aux := top.AuxLayers
	if aux == nil && top.EagleConfig != nil {
		aux = top.EagleConfig.AuxLayers
	}
	if aux == nil && hc.AuxLayers != nil {
		aux = hc.AuxLayers
	}
	switch len(aux) {
	case 0:
		if targetLayers <= 0 {
			return cfg, fmt.Errorf("%s: config.json names no eagle_aux_hidden_state_layer_ids: give the target model, whose layer count decides them", dir)
		}
		cfg.ExtractLayers = DefaultExtractLayers(targetLayers)
	case 3:
		cfg.ExtractLayers = [3]int{aux[0], aux[1], aux[2]}
	default:
		return cfg, fmt.Errorf("%s: config.json: eagle_aux_hidden_state_layer_ids has %d layers, want 3", dir, len(aux))
	}
	return cfg, nil
}

// eagle3HFNames maps an HF head's tensor names (SafeAILab "midlayer.*"
// or speculators "layers.0.*") to GGUF names.
func eagle3HFNames(st *safetensors.Model) map[string]string {
	p := "midlayer."
	if _, ok := st.Tensor(p + "self_attn.q_proj.weight"); !ok {
		p = "layers.0."
	}
	return map[string]string{
		"fc.weight":                           e3FC,
		p + "input_layernorm.weight":          e3InNorm,
		p + "hidden_norm.weight":              e3HidNorm,
		p + "self_attn.q_proj.weight":         e3Q,
		p + "self_attn.k_proj.weight":         e3K,
		p + "self_attn.v_proj.weight":         e3V,
		p + "self_attn.o_proj.weight":         e3O,
		p + "post_attention_layernorm.weight": e3PostNorm,
		p + "mlp.gate_proj.weight":            e3Gate,
		p + "mlp.up_proj.weight":              e3Up,
		p + "mlp.down_proj.weight":            e3Down,
		"norm.weight":                         e3Norm,
		"lm_head.weight":                      e3Head,
		"embed_tokens.weight":                 e3Embd,
	}
}

// eagle3HFTensor is an HF head tensor's ggml type and dims (ggml order:
// the shape reversed); weights are F32, F16 or BF16.
func eagle3HFTensor(ti *safetensors.TensorInfo) (gguf.Type, []int64, error) {
	var typ gguf.Type
	switch ti.Dtype {
	case safetensors.F32:
		typ = gguf.F32
	case safetensors.F16:
		typ = gguf.F16
	case safetensors.BF16:
		typ = gguf.BF16
	default:
		return 0, nil, fmt.Errorf("tensor %q has dtype %s, want F32, F16 or BF16", ti.Name, ti.Dtype)
	}
	dims := make([]int64, len(ti.Shape))
	for i, d := range ti.Shape {
		dims[len(dims)-1-i] = d
	}
	return typ, dims, nil
}

func eagle3FromHF(target *Engine, cfg Eagle3Config, st *safetensors.Model) (*Eagle3, error) {
	names := eagle3HFNames(st)
	var ts []*model.Tensor
	for hf, name := range names {
		ti, ok := st.Tensor(hf)
		if !ok {
			continue // NewEagle3 names what is missing
		}
		typ, dims, err := eagle3HFTensor(ti)
		if err != nil {
			return nil, err
		}
		data, err := st.Data(hf)
		if err != nil {
			return nil, err
		}
		ts = append(ts, model.NewTensor(name, dims, typ, data))
	}
	if cfg.DraftVocab == 0 {
		if ti, ok := st.Tensor("lm_head.weight"); ok && len(ti.Shape) == 2 {
			cfg.DraftVocab = int(ti.Shape[0])
		}
	}
	if ti, ok := st.Tensor("d2t"); ok {
		if ti.Dtype != safetensors.I64 || len(ti.Shape) != 1 || ti.Shape[0] != int64(cfg.DraftVocab) {
			return nil, fmt.Errorf("tensor \"d2t\": dtype %s shape %v, want I64 [%d]", ti.Dtype, ti.Shape, cfg.DraftVocab)
		}
		raw, err := st.Data("d2t")
		if err != nil {
			return nil, err
		}
		// HF stores offsets: target id = i + d2t[i].
		abs := make([]byte, len(raw))
		for i := 0; i < cfg.DraftVocab; i++ {
			off := int64(binary.LittleEndian.Uint64(raw[8*i:]))
			binary.LittleEndian.PutUint64(abs[8*i:], uint64(int64(i)+off))
		}
		ts = append(ts, model.NewTensor(e3D2T, []int64{int64(cfg.DraftVocab)}, gguf.I64, abs))
	}
	return NewEagle3(target, cfg, ts)
}

// OpenEagle3 loads an EAGLE-3 head from a GGUF file (LoadEagle3) or a
// Hugging Face directory (LoadEagle3HF).
func OpenEagle3(target *Engine, path string) (*Eagle3, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return LoadEagle3HF(target, path)
	}
	return LoadEagle3(target, path)
}
