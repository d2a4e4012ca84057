package synth

import (
	"fmt"
	"io"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

// minVocab is <unk>, <s>, </s> and the 256 byte tokens.
const minVocab = 3 + 256

// VocabMetadata returns tokenizer.ggml.* keys for a SentencePiece-style
// ("llama") vocabulary of n tokens: <unk> 0, <s> 1, </s> 2, the byte
// tokens <0x00>…<0xFF> (3–258), then filler pieces "▁a", "▁b", … with
// decreasing scores. llama.cpp needs a vocabulary to load a model; this one
// lets it decode token ids (tests pass ids, not text).
func VocabMetadata(n int) (gguf.Metadata, error) {
	if n < minVocab {
		return nil, fmt.Errorf("synth: vocabulary of %d tokens, want at least %d (specials and byte tokens)", n, minVocab)
	}
	tokens := make([]string, n)
	scores := make([]float32, n)
	types := make([]int32, n)
	tokens[0], types[0] = "<unk>", 2 // unknown
	tokens[1], types[1] = "<s>", 3   // control
	tokens[2], types[2] = "</s>", 3
	for b := range 256 {
		tokens[3+b], types[3+b] = fmt.Sprintf("<0x%02X>", b), 6 // byte
	}
	for i := minVocab; i < n; i++ {
		k := i - minVocab
		tokens[i], types[i], scores[i] = "▁"+word(k), 1, -float32(k)
	}
	var md gguf.Metadata
	md.Set("tokenizer.ggml.model", "llama")
	md.Set("tokenizer.ggml.tokens", tokens)
	md.Set("tokenizer.ggml.scores", scores)
	md.Set("tokenizer.ggml.token_type", types)
	md.Set("tokenizer.ggml.unknown_token_id", uint32(0))
	md.Set("tokenizer.ggml.bos_token_id", uint32(1))
	md.Set("tokenizer.ggml.eos_token_id", uint32(2))
	md.Set("tokenizer.ggml.add_bos_token", true)
	md.Set("tokenizer.ggml.add_eos_token", false)
	return md, nil
}

// word is k in bijective base 26 over a–z: a, b, …, z, aa, ab, …
func word(k int) string {
	var b []byte
	for k++; k > 0; k = (k - 1) / 26 {
		b = append(b, byte('a'+(k-1)%26))
	}
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// MatrixTypes are the types WriteGGUF can store the weight matrices in.
var MatrixTypes = []gguf.Type{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q1_0}

// WriteGGUF writes the synthetic model as a GGUF v3 file that llama.cpp
// loads: llama.cpp tensor names and hyper-parameter keys
// (model.Model.GGUFMetadata), a VocabMetadata vocabulary of
// cfg.VocabSize tokens (at least 259), and every 2-D weight matrix in typ
// (one of MatrixTypes; ggml's reference quantizers for Q8_0 and Q1_0).
// Norms, biases, ssm_a, ssm_dt and the DeltaNet conv kernel stay F32.
func WriteGGUF(path string, cfg model.Config, seed uint64, typ gguf.Type) error {
	return writeGGUF(path, cfg, seed, typ, Weights)
}

// WriteGGUFOneBit writes the 1-bit-native model (OneBitWeights) as 1-bit
// models are released: each tensor in the type the q1 recipe gives it
// (Q1_0 matrices, a Q2_0 head, Q8_0 DeltaNet gates), which holds its values
// exactly, so the file decodes exactly like OneBitModel's weights.
func WriteGGUFOneBit(path string, cfg model.Config, seed uint64) error {
	return writeGGUF(path, cfg, seed, q1Types, OneBitWeights)
}

// q1Types is the typ argument of ggufWriter for "the q1 recipe's types".
const q1Types = gguf.Type(1<<31 - 1)

func writeGGUF(path string, cfg model.Config, seed uint64, typ gguf.Type, weights weightsFunc) error {
	w, err := ggufWriter(cfg, seed, typ, weights)
	if err != nil {
		return fmt.Errorf("synth: %s: %w", path, err)
	}
	return gguf.WriteFile(path, w)
}

// weightsFunc is Weights or OneBitWeights.
type weightsFunc func(cfg model.Config, seed uint64) ([]*model.Tensor, error)

func ggufWriter(cfg model.Config, seed uint64, typ gguf.Type, weights weightsFunc) (*gguf.Writer, error) {
	ok := typ == q1Types
	for _, t := range MatrixTypes {
		ok = ok || t == typ
	}
	if !ok {
		return nil, fmt.Errorf("matrix type %v not supported (want one of %v)", typ, MatrixTypes)
	}
	ts, err := weights(cfg, seed)
	if err != nil {
		return nil, err
	}
	m, err := model.New(cfg, ts)
	if err != nil {
		return nil, err
	}
	md := m.GGUFMetadata()
	md.Set("general.name", "synthetic "+string(cfg.Arch))
	vocab, err := VocabMetadata(cfg.VocabSize)
	if err != nil {
		return nil, err
	}
	md = append(md, vocab...)
	var ds []quantize.Decision
	if typ == q1Types {
		if ds, err = quantize.Plan(m, quantize.Options{Recipe: quantize.Recipes["q1"]}); err != nil {
			return nil, err
		}
	}
	w := &gguf.Writer{Metadata: md}
	for i, t := range m.Tensors {
		tt := gguf.F32
		switch {
		case ds != nil:
			tt = ds[i].Kind.Type
		case len(t.Dims) == 2 && !strings.HasSuffix(t.Name, "ssm_conv1d.weight"):
			tt = typ
		}
		if _, err := tt.RowBytes(t.Dims[0]); err != nil {
			return nil, fmt.Errorf("tensor %q: rows of %d do not fit %v: %w", t.Name, t.Dims[0], tt, err)
		}
		e := encoded{t: t, typ: tt}
		if typ != q1Types { // Weights: plain normal matrices stream a few rows at a time
			g := gen{cfg: cfg, seed: seed}
			spec := model.TensorSpec{Name: t.Name, Dims: t.Dims}
			if std, ok := g.normalStd(spec); ok {
				e.gen, e.std, e.rows = g, std, true
			}
		}
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: t.Name, Dims: t.Dims, Type: tt, Data: e})
	}
	return w, nil
}

// encoded streams a tensor's values converted to a ggml type. With rows
// set, the values are Weights' normal draws, generated and written a few
// rows at a time (the same bytes, in bounded memory: a 9B-shaped model's
// embedding is 4 GB of float32).
type encoded struct {
	t    *model.Tensor
	typ  gguf.Type
	rows bool
	gen  gen
	std  float64
}

func (e encoded) WriteTo(w io.Writer) (int64, error) {
	if e.rows {
		return e.writeRows(w)
	}
	v, err := e.t.Float32()
	if err != nil {
		return 0, err
	}
	row := int(e.t.Dims[0])
	rb, err := e.typ.RowBytes(int64(row))
	if err != nil {
		return 0, err
	}
	out := make([]byte, int(rb)*(len(v)/row))
	for r := 0; r < len(v)/row; r++ {
		src, dst := v[r*row:(r+1)*row], out[r*int(rb):(r+1)*int(rb)]
		quantize.EncodeRow(quantize.Kind{Type: e.typ}, src, dst)
	}
	n, err := w.Write(out)
	return int64(n), err
}

func (e encoded) writeRows(w io.Writer) (int64, error) {
	row := int(e.t.Dims[0])
	rows := int(e.t.Rows())
	rb, err := e.typ.RowBytes(int64(row))
	if err != nil {
		return 0, err
	}
	k := max(1, (8<<20)/(4*row)) // rows per chunk: 8 MiB of float32
	v := make([]float32, k*row)
	out := make([]byte, k*int(rb))
	rng := e.gen.rng(e.t.Name)
	var n int64
	for r0 := 0; r0 < rows; r0 += k {
		m := min(k, rows-r0)
		fillNormal(rng, v[:m*row], e.std)
		for i := 0; i < m; i++ {
			quantize.EncodeRow(quantize.Kind{Type: e.typ}, v[i*row:(i+1)*row], out[i*int(rb):(i+1)*int(rb)])
		}
		c, err := w.Write(out[:m*int(rb)])
		n += int64(c)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
