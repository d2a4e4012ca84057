package synth

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// WriteEagle3 writes an EAGLE-3 draft head for a target of configuration
// tc in llama.cpp's eagle3 GGUF layout (architecture eagle3; fc, one
// decoder layer, output_norm, output and absolute d2t ids), with random
// F32 weights: the target's hidden size, 4 heads over 2 KV heads, FFN
// twice the hidden size, EAGLE-3's default taps and draftVocab draft ids
// spread over the target's vocabulary. Its proposals are arbitrary; it is
// for exercising the paths a head takes, not for acceptance.
func WriteEagle3(path string, tc model.Config, draftVocab int, seed uint64) error {
	h := int64(tc.Hidden)
	if h%8 != 0 || draftVocab <= 0 || draftVocab > tc.VocabSize {
		return fmt.Errorf("synth: eagle3 head: hidden %d (want a multiple of 8), draft vocabulary %d of %d", h, draftVocab, tc.VocabSize)
	}
	heads, kv, hd, ffn := int64(4), int64(2), h/4, 2*h
	taps := []int32{int32(min(2, tc.Layers)), int32(tc.Layers / 2), int32(max(0, tc.Layers-3))}
	slices.Sort(taps) // EAGLE-3's 2, N/2, N−3, ascending for small models
	var md gguf.Metadata
	md.Set("general.architecture", "eagle3")
	md.Set("eagle3.embedding_length", uint32(h))
	md.Set("eagle3.feed_forward_length", uint32(ffn))
	md.Set("eagle3.block_count", uint32(1))
	md.Set("eagle3.attention.head_count", uint32(heads))
	md.Set("eagle3.attention.head_count_kv", uint32(kv))
	md.Set("eagle3.attention.key_length", uint32(hd))
	md.Set("eagle3.attention.value_length", uint32(hd))
	md.Set("eagle3.attention.layer_norm_rms_epsilon", float32(1e-5))
	md.Set("eagle3.rope.freq_base", float32(10000))
	md.Set("eagle3.rope.dimension_count", uint32(hd))
	md.Set("eagle3.target_layers", taps)
	md.Set("eagle3.target_hidden_size", uint32(h))
	md.Set("eagle3.norm_before_residual", false)
	rng := rand.New(rand.NewPCG(seed, 13))
	w := &gguf.Writer{Metadata: md}
	add := func(name string, dims ...int64) {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		b := make([]byte, 4*n)
		for i := int64(0); i < n; i++ {
			v := float32(rng.NormFloat64() / math.Sqrt(float64(dims[0])))
			if len(dims) == 1 {
				v = float32(1 + 0.1*rng.NormFloat64())
			}
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: name, Dims: dims, Type: gguf.F32, Data: gguf.Bytes(b)})
	}
	add("fc.weight", 3*h, h)
	add("blk.0.attn_norm.weight", h)
	add("blk.0.attn_norm_2.weight", h)
	add("blk.0.attn_q.weight", 2*h, heads*hd)
	add("blk.0.attn_k.weight", 2*h, kv*hd)
	add("blk.0.attn_v.weight", 2*h, kv*hd)
	add("blk.0.attn_output.weight", heads*hd, h)
	add("blk.0.ffn_norm.weight", h)
	add("blk.0.ffn_gate.weight", h, ffn)
	add("blk.0.ffn_up.weight", h, ffn)
	add("blk.0.ffn_down.weight", ffn, h)
	add("output_norm.weight", h)
	add("output.weight", h, int64(draftVocab))
	d2t := make([]byte, 8*draftVocab)
	for i := range draftVocab {
		binary.LittleEndian.PutUint64(d2t[8*i:], uint64(i*tc.VocabSize/draftVocab))
	}
	w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: "d2t", Dims: []int64{int64(draftVocab)}, Type: gguf.I64, Data: gguf.Bytes(d2t)})
	return gguf.WriteFile(path, w)
}
