package runtime

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/safetensors"
)

// Eagle3Target is what converting an EAGLE-3 head needs from its target
// model. Zero fields are unknown: Layers then requires the head's config
// to name its feature layers, Hidden its target_hidden_size, and Vocab
// leaves d2t's range unchecked.
type Eagle3Target struct {
	Layers, Hidden, Vocab int
	// Metadata's tokenizer.* keys are copied into the head's GGUF, as
	// llama.cpp's converter copies the target's tokenizer.
	Metadata gguf.Metadata
}

// ConvertEagle3HF writes the EAGLE-3 head in Hugging Face form at dir
// (EAGLE / SpecForge "midlayer.*" or speculators "layers.0.*" names: fc
// over the concatenated target features, one decoder layer, norm,
// lm_head, d2t as offsets, t2d) to out in llama.cpp's EAGLE-3 GGUF layout
// (architecture eagle3, eagle3.target_layers, eagle3.target_hidden_size,
// eagle3.norm_before_residual; blk.0.* names with hidden_norm as
// attn_norm_2; q and k rows permuted for NORM rope; d2t as absolute
// target ids, I64; t2d, which llama.cpp does not use, checked against d2t
// and left out). Weights keep their dtype (F32, F16 or BF16). LoadEagle3
// reads the file; it proposes exactly what LoadEagle3HF's head does.
func ConvertEagle3HF(dir, out string, target Eagle3Target) (Eagle3Config, error) {
	cfg, err := readEagle3HFConfig(dir, target.Layers)
	if err != nil {
		return cfg, err
	}
	switch {
	case cfg.TargetHidden == 0 && target.Hidden == 0:
		return cfg, fmt.Errorf("%s: config.json has no target_hidden_size: give the target model", dir)
	case cfg.TargetHidden == 0:
		cfg.TargetHidden = target.Hidden
	case target.Hidden != 0 && cfg.TargetHidden != target.Hidden:
		return cfg, fmt.Errorf("%s: target_hidden_size %d, the target model's hidden size is %d", dir, cfg.TargetHidden, target.Hidden)
	}
	if target.Layers > 0 {
		for _, l := range cfg.ExtractLayers {
			if l < 0 || l > target.Layers {
				return cfg, fmt.Errorf("%s: feature layer %d outside the target's [0, %d]", dir, l, target.Layers)
			}
		}
	}
	st, err := safetensors.Open(dir)
	if err != nil {
		return cfg, err
	}
	defer st.Close()
	ts, err := eagle3GGUFTensors(&cfg, st, target.Vocab)
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", dir, err)
	}
	md := Eagle3Metadata(cfg)
	for _, kv := range target.Metadata {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			md = append(md, kv)
		}
	}
	if err := gguf.WriteFile(out, &gguf.Writer{Metadata: md, Tensors: ts}); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// eagle3GGUFTensors maps the head's tensors to llama.cpp's names and
// layout, setting cfg.DraftVocab from lm_head when the config lacks it.
func eagle3GGUFTensors(cfg *Eagle3Config, st *safetensors.Model, vocab int) ([]gguf.WriterTensor, error) {
	if ti, ok := st.Tensor("lm_head.weight"); ok && len(ti.Shape) == 2 && cfg.DraftVocab == 0 {
		cfg.DraftVocab = int(ti.Shape[0])
	}
	names := eagle3HFNames(st)
	required := []string{e3FC, e3InNorm, e3HidNorm, e3Q, e3K, e3V, e3O, e3PostNorm, e3Gate, e3Up, e3Down, e3Norm, e3Head}
	H, T := int64(cfg.Hidden), int64(cfg.TargetHidden)
	qd, kvd := int64(cfg.Heads*cfg.HeadDim), int64(cfg.KVHeads*cfg.HeadDim)
	want := map[string][]int64{ // ggml dims
		e3FC: {3 * T, H}, e3Q: {2 * H, qd}, e3K: {2 * H, kvd}, e3V: {2 * H, kvd}, e3O: {qd, H},
		e3Gate: {H, int64(cfg.FFN)}, e3Up: {H, int64(cfg.FFN)}, e3Down: {int64(cfg.FFN), H},
		e3Head: {H, int64(cfg.DraftVocab)}, e3InNorm: {H}, e3HidNorm: {H}, e3PostNorm: {H}, e3Norm: {H},
	}
	if vocab > 0 {
		want[e3Embd] = []int64{H, int64(vocab)}
	}
	var out []gguf.WriterTensor
	have := map[string]bool{}
	hfs := make([]string, 0, len(names))
	for hf := range names {
		hfs = append(hfs, hf)
	}
	slices.Sort(hfs)
	for _, hf := range hfs {
		name := names[hf]
		ti, ok := st.Tensor(hf)
		if !ok {
			continue
		}
		typ, dims, err := eagle3HFTensor(ti)
		if err != nil {
			return nil, err
		}
		if w, ok := want[name]; ok && !slices.Equal(dims, w) {
			return nil, fmt.Errorf("tensor %q has shape %v, want %v", hf, ti.Shape, reversed(w))
		}
		data, err := st.Data(hf)
		if err != nil {
			return nil, err
		}
		if name == e3Q || name == e3K {
			data = permuteNorm(data, int(dims[1])/cfg.HeadDim, cfg.HeadDim, int(dims[0])*ti.Dtype.Bits()/8)
		}
		out = append(out, gguf.WriterTensor{Name: name, Dims: dims, Type: typ, Data: gguf.Bytes(data)})
		have[name] = true
	}
	for _, name := range required {
		if !have[name] {
			return nil, fmt.Errorf("missing tensor %s (GGUF %s)", hfNameOf(names, name), name)
		}
	}
	d2t, err := eagle3D2T(st, cfg.DraftVocab, vocab)
	if err != nil {
		return nil, err
	}
	if d2t != nil {
		out = append(out, gguf.WriterTensor{Name: e3D2T, Dims: []int64{int64(cfg.DraftVocab)}, Type: gguf.I64, Data: gguf.Bytes(d2t)})
	} else if vocab > 0 && cfg.DraftVocab != vocab {
		return nil, fmt.Errorf("no d2t tensor, and the draft vocabulary (%d) is not the target's (%d)", cfg.DraftVocab, vocab)
	}
	slices.SortFunc(out, func(a, b gguf.WriterTensor) int { return strings.Compare(a.Name, b.Name) })
	cfg.RopeNeox = false
	return out, nil
}

func reversed(d []int64) []int64 {
	r := slices.Clone(d)
	slices.Reverse(r)
	return r
}

func hfNameOf(names map[string]string, gg string) string {
	for hf, n := range names {
		if n == gg {
			return hf
		}
	}
	return gg
}

// permuteNorm reorders the rows of each of heads blocks of d rows from
// Hugging Face's rotate-half order to ggml's NORM rope order: row 2i+j of
// a head is row j·d/2+i (llama.cpp's LlamaModel.permute).
func permuteNorm(data []byte, heads, d, rowBytes int) []byte {
	out := make([]byte, len(data))
	for h := 0; h < heads; h++ {
		for r := 0; r < d; r++ {
			src := h*d + (r%2)*d/2 + r/2
			copy(out[(h*d+r)*rowBytes:(h*d+r+1)*rowBytes], data[src*rowBytes:(src+1)*rowBytes])
		}
	}
	return out
}

// eagle3D2T returns d2t as absolute target ids (I64 bytes), checked: ids
// in the target vocabulary (when known), no id twice, and t2d (when
// present) marking exactly those ids. nil when the head has no d2t.
func eagle3D2T(st *safetensors.Model, n, vocab int) ([]byte, error) {
	ti, ok := st.Tensor("d2t")
	if !ok {
		if _, ok := st.Tensor("t2d"); ok {
			return nil, fmt.Errorf("tensor \"t2d\" without \"d2t\"")
		}
		return nil, nil
	}
	if ti.Dtype != safetensors.I64 || len(ti.Shape) != 1 || ti.Shape[0] != int64(n) {
		return nil, fmt.Errorf("tensor \"d2t\": dtype %s shape %v, want I64 [%d] (draft_vocab_size)", ti.Dtype, ti.Shape, n)
	}
	raw, err := st.Data("d2t")
	if err != nil {
		return nil, err
	}
	abs := make([]byte, len(raw))
	seen := map[int64]int{}
	ids := make([]int64, n)
	for i := range n {
		id := int64(i) + int64(binary.LittleEndian.Uint64(raw[8*i:]))
		if id < 0 || (vocab > 0 && id >= int64(vocab)) {
			return nil, fmt.Errorf("tensor \"d2t\": draft token %d maps to target id %d, outside the target vocabulary [0, %d)", i, id, vocab)
		}
		if j, dup := seen[id]; dup {
			return nil, fmt.Errorf("tensor \"d2t\": draft tokens %d and %d both map to target id %d", j, i, id)
		}
		seen[id], ids[i] = i, id
		binary.LittleEndian.PutUint64(abs[8*i:], uint64(id))
	}
	if tt, ok := st.Tensor("t2d"); ok {
		if tt.Dtype != safetensors.BOOL || len(tt.Shape) != 1 || (vocab > 0 && tt.Shape[0] != int64(vocab)) {
			return nil, fmt.Errorf("tensor \"t2d\": dtype %s shape %v, want BOOL [target vocabulary %d]", tt.Dtype, tt.Shape, vocab)
		}
		mask, err := st.Data("t2d")
		if err != nil {
			return nil, err
		}
		marked := 0
		for _, b := range mask {
			if b != 0 {
				marked++
			}
		}
		for i, id := range ids {
			if id >= int64(len(mask)) || mask[id] == 0 {
				return nil, fmt.Errorf("tensor \"t2d\" does not mark target id %d, which d2t maps draft token %d to", id, i)
			}
		}
		if marked != n {
			return nil, fmt.Errorf("tensor \"t2d\" marks %d target ids, d2t maps %d", marked, n)
		}
	}
	return abs, nil
}

// IsEagle3HF reports whether dir holds an EAGLE-3 head in Hugging Face
// form: its config.json names an Eagle3 architecture, or (as llama.cpp
// detects them) has a draft_vocab_size and one hidden layer.
func IsEagle3HF(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return false
	}
	var c struct {
		Architectures []string `json:"architectures"`
		DraftVocab    *int     `json:"draft_vocab_size"`
		Layers        int      `json:"num_hidden_layers"`
	}
	if json.Unmarshal(b, &c) != nil {
		return false
	}
	for _, a := range c.Architectures {
		if strings.Contains(strings.ToLower(a), "eagle3") {
			return true
		}
	}
	return c.DraftVocab != nil && c.Layers == 1
}

// IsEagle3 reports whether path is an EAGLE-3 head: a Hugging Face
// directory (IsEagle3HF) or a GGUF file of architecture eagle3.
func IsEagle3(path string) bool {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return IsEagle3HF(path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	a, _ := f.Metadata.String("general.architecture")
	return a == Eagle3Arch
}
