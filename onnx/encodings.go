package onnx

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// EncodingsVersion is the AIMET encodings format written (qnn-genie.md §3):
// lists of named entries, each PER_TENSOR, PER_CHANNEL or PER_BLOCK.
const EncodingsVersion = "1.0.0"

// Encoding types.
const (
	PerTensor  = "PER_TENSOR"
	PerChannel = "PER_CHANNEL"
	PerBlock   = "PER_BLOCK"
)

// Encoding is one tensor's quantization in AIMET 1.0.0 form. A value x
// has the code q = clamp(round(x/scale) − offset, 0, 2^bw − 1) and
// decodes to (q + offset)·scale; symmetric encodings have offset
// −2^(bw−1), so q + offset is the signed integer code.
//
// Scales are listed per output channel (PER_CHANNEL) or per output
// channel and block of BlockSize consecutive input elements, channel
// major (PER_BLOCK) — the order of the rows and blocks of the ggml tensor.
type Encoding struct {
	Name      string   `json:"name"`
	DType     string   `json:"dtype"` // "INT"
	EncType   string   `json:"enc_type"`
	IsSym     bool     `json:"is_sym"`
	BW        int      `json:"bw"`
	BlockSize int      `json:"block_size,omitempty"`
	Scale     Float32s `json:"scale"`
	Offset    []int64  `json:"offset"`
}

// Float32s are float32 values written as the float64 numbers they equal,
// so a reader parsing doubles or floats gets exactly the same value.
type Float32s []float32

// MarshalJSON writes each value's exact decimal (as a float64).
func (f Float32s) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(f)*12)
	b = append(b, '[')
	for i, v := range f {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("scale %v is not finite", v)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(v), 'g', -1, 64)
	}
	return append(b, ']'), nil
}

// Encodings is a stage's stage.encodings.json.
type Encodings struct {
	Version             string     `json:"version"`
	ActivationEncodings []Encoding `json:"activation_encodings"`
	ParamEncodings      []Encoding `json:"param_encodings"`
}

// Param returns the parameter encoding named name, or nil.
func (e *Encodings) Param(name string) *Encoding {
	for i := range e.ParamEncodings {
		if e.ParamEncodings[i].Name == name {
			return &e.ParamEncodings[i]
		}
	}
	return nil
}

// Activation returns the activation encoding named name, or nil.
func (e *Encodings) Activation(name string) *Encoding {
	for i := range e.ActivationEncodings {
		if e.ActivationEncodings[i].Name == name {
			return &e.ActivationEncodings[i]
		}
	}
	return nil
}

// Range is an activation's calibrated [Min, Max].
type Range struct{ Min, Max float32 }

// activation returns a 16-bit encoding covering r: asymmetric, with an
// integer offset that represents 0 exactly (AIMET's convention).
func activation(name string, r Range) (Encoding, error) {
	lo, hi := min(r.Min, 0), max(r.Max, 0)
	if !(hi > lo) || math.IsInf(float64(hi-lo), 0) {
		return Encoding{}, fmt.Errorf("activation %s: bad range [%v, %v]", name, r.Min, r.Max)
	}
	const levels = 1<<16 - 1
	scale := (hi - lo) / levels
	off := int64(math.Round(float64(lo / scale)))
	return Encoding{Name: name, DType: "INT", EncType: PerTensor, BW: 16,
		Scale: Float32s{scale}, Offset: []int64{off}}, nil
}

// symmetric16 is a 16-bit symmetric encoding whose largest code is limit.
func symmetric16(name string, limit float32) Encoding {
	return Encoding{Name: name, DType: "INT", EncType: PerTensor, IsSym: true, BW: 16,
		Scale: Float32s{limit / (1<<15 - 1)}, Offset: []int64{-1 << 15}}
}

// Code quantizes x with scale index i of e and returns the signed integer
// code (q + offset), clamped to the bit width.
func (e *Encoding) Code(x float32, i int) int64 {
	s, off := e.Scale[i], e.Offset[i]
	q := int64(math.Round(float64(x/s))) - off
	q = max(0, min(q, 1<<e.BW-1))
	return q + off
}

// Write writes enc as JSON to w: the fixed header, then one entry per line
// so even very long scale lists stay diff- and stream-friendly. The same
// Encodings give the same bytes.
func (e *Encodings) Write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	fmt.Fprintf(bw, "{\n  \"version\": %q,\n", e.Version)
	list := func(key string, l []Encoding, last bool) error {
		fmt.Fprintf(bw, "  %q: [", key)
		for i := range l {
			b, err := json.Marshal(&l[i])
			if err != nil {
				return fmt.Errorf("encoding %s: %w", l[i].Name, err)
			}
			if i > 0 {
				bw.WriteByte(',')
			}
			bw.WriteString("\n    ")
			bw.Write(b)
		}
		if len(l) > 0 {
			bw.WriteString("\n  ")
		}
		if last {
			bw.WriteString("]\n")
		} else {
			bw.WriteString("],\n")
		}
		return nil
	}
	if err := list("activation_encodings", e.ActivationEncodings, false); err != nil {
		return err
	}
	if err := list("param_encodings", e.ParamEncodings, true); err != nil {
		return err
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// WriteFile writes enc to path through atomicfile.
func (e *Encodings) WriteFile(path string) error {
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := e.Write(f); err != nil {
		return fmt.Errorf("onnx: write %s: %w", path, err)
	}
	return f.Commit()
}

// ReadEncodings reads an encodings file strictly: unknown keys, a
// different version, or entries whose lists do not fit their type are
// errors naming the file and the entry.
func ReadEncodings(path string) (*Encodings, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodeEncodings(b, path)
}

// DecodeEncodings parses and validates encodings JSON; name is used in
// errors.
func DecodeEncodings(data []byte, name string) (*Encodings, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var e Encodings
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("onnx: encodings %s: %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("onnx: encodings %s: data after the top-level object", name)
	}
	if e.Version != EncodingsVersion {
		return nil, fmt.Errorf("onnx: encodings %s: version %q, want %q", name, e.Version, EncodingsVersion)
	}
	if e.ActivationEncodings == nil || e.ParamEncodings == nil {
		return nil, fmt.Errorf("onnx: encodings %s: activation_encodings and param_encodings are required", name)
	}
	seen := map[string]bool{}
	for _, l := range [][]Encoding{e.ActivationEncodings, e.ParamEncodings} {
		for i := range l {
			if err := l[i].validate(); err != nil {
				return nil, fmt.Errorf("onnx: encodings %s: %w", name, err)
			}
			if seen[l[i].Name] {
				return nil, fmt.Errorf("onnx: encodings %s: %q listed twice", name, l[i].Name)
			}
			seen[l[i].Name] = true
		}
	}
	return &e, nil
}

// UnmarshalJSON reads a list of numbers as float32s, refusing values a
// float32 cannot hold.
func (f *Float32s) UnmarshalJSON(b []byte) error {
	var v []float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = make(Float32s, len(v))
	for i, x := range v {
		if math.Abs(x) > math.MaxFloat32 {
			return fmt.Errorf("scale %v out of float32 range", x)
		}
		(*f)[i] = float32(x)
	}
	return nil
}

func (e *Encoding) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%q: %s", e.Name, fmt.Sprintf(format, a...))
	}
	if e.Name == "" {
		return bad("empty name")
	}
	if e.DType != "INT" {
		return bad("dtype %q, want INT", e.DType)
	}
	if e.BW < 1 || e.BW > 32 {
		return bad("bw %d, want 1..32", e.BW)
	}
	if len(e.Scale) == 0 || len(e.Scale) != len(e.Offset) {
		return bad("%d scales and %d offsets", len(e.Scale), len(e.Offset))
	}
	switch e.EncType {
	case PerTensor:
		if len(e.Scale) != 1 {
			return bad("%s with %d scales", e.EncType, len(e.Scale))
		}
	case PerChannel:
	case PerBlock:
		if e.BlockSize < 1 {
			return bad("%s needs block_size ≥ 1", e.EncType)
		}
	default:
		return bad("enc_type %q", e.EncType)
	}
	if e.EncType != PerBlock && e.BlockSize != 0 {
		return bad("block_size with %s", e.EncType)
	}
	lo, hi := -(int64(1) << e.BW), int64(0)
	for i, s := range e.Scale {
		if !(s > 0) || math.IsInf(float64(s), 0) {
			return bad("scale[%d] = %v, want > 0", i, s)
		}
		o := e.Offset[i]
		if e.IsSym && o != -(int64(1)<<(e.BW-1)) {
			return bad("symmetric offset[%d] = %d, want %d", i, o, -(int64(1) << (e.BW - 1)))
		}
		if o < lo || o > hi {
			return bad("offset[%d] = %d outside [%d, 0]", i, o, lo)
		}
	}
	return nil
}
