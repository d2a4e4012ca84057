package peers

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// GGUFTensor is one tensor as @huggingface/gguf reads it.
type GGUFTensor struct {
	Name   string
	Type   uint32  // ggml type id
	Dims   []int64 // ggml ne order: Dims[0] is the row length
	Offset uint64  // relative to the data section
}

// GGUFKV is one metadata pair as @huggingface/gguf reads it.
type GGUFKV struct {
	Key  string
	Type uint32 // GGUF value type: 0 uint8 … 8 string, 9 array, 10 uint64, 11 int64, 12 float64
	// ElemType is the element type of an array.
	ElemType uint32
	// Value is uint64 (unsigned types), int64 (signed types), float64,
	// bool or string; an array is a []any of those.
	Value any
}

// GGUFFile is a GGUF header as @huggingface/gguf reads it.
type GGUFFile struct {
	Version  uint32
	Metadata []GGUFKV // file order
	Tensors  []GGUFTensor
}

// GGUFTensors lists the tensors of a GGUF file, in file order, as the
// independent @huggingface/gguf reader sees them.
func GGUFTensors(path string) ([]GGUFTensor, error) {
	f, err := GGUFRead(path)
	if err != nil {
		return nil, err
	}
	return f.Tensors, nil
}

// GGUFRead reads a GGUF file's header (metadata and tensor table) with
// @huggingface/gguf.
func GGUFRead(path string) (*GGUFFile, error) {
	var r struct {
		Version  uint32
		Metadata []struct {
			Key     string
			Type    uint32
			SubType *uint32 `json:"sub_type"`
			Value   json.RawMessage
		}
		Tensors []struct {
			Name   string
			Type   uint32
			Dims   []string
			Offset string
		}
	}
	if err := runNode(HFGGUF, "gguf.mjs", map[string]any{"path": path}, &r); err != nil {
		return nil, fmt.Errorf("peers: @huggingface/gguf on %s: %w", path, err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("peers: @huggingface/gguf on %s: "+format, append([]any{path}, a...)...)
	}
	f := &GGUFFile{Version: r.Version, Tensors: make([]GGUFTensor, len(r.Tensors))}
	for _, kv := range r.Metadata {
		x := GGUFKV{Key: kv.Key, Type: kv.Type}
		var err error
		if kv.Type == 9 {
			if kv.SubType == nil {
				return nil, bad("key %q: array without element type", kv.Key)
			}
			x.ElemType = *kv.SubType
			var elems []json.RawMessage
			if err = json.Unmarshal(kv.Value, &elems); err == nil {
				list := make([]any, len(elems))
				for i, e := range elems {
					if list[i], err = ggufScalar(x.ElemType, e); err != nil {
						break
					}
				}
				x.Value = list
			}
		} else {
			x.Value, err = ggufScalar(kv.Type, kv.Value)
		}
		if err != nil {
			return nil, bad("key %q: %v", kv.Key, err)
		}
		f.Metadata = append(f.Metadata, x)
	}
	for i, t := range r.Tensors {
		f.Tensors[i] = GGUFTensor{Name: t.Name, Type: t.Type, Dims: make([]int64, len(t.Dims))}
		for j, d := range t.Dims {
			v, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				return nil, bad("tensor %q: bad dim %q", t.Name, d)
			}
			f.Tensors[i].Dims[j] = v
		}
		off, err := strconv.ParseUint(t.Offset, 10, 64)
		if err != nil {
			return nil, bad("tensor %q: bad offset %q", t.Name, t.Offset)
		}
		f.Tensors[i].Offset = off
	}
	return f, nil
}

// ggufScalar decodes one JSON value of GGUF value type t.
func ggufScalar(t uint32, raw json.RawMessage) (any, error) {
	switch t {
	case 0, 2, 4, 10: // unsigned; 64-bit ones arrive as strings
		var s json.Number
		if err := json.Unmarshal(unquote(raw), &s); err != nil {
			return nil, err
		}
		return strconv.ParseUint(s.String(), 10, 64)
	case 1, 3, 5, 11:
		var s json.Number
		if err := json.Unmarshal(unquote(raw), &s); err != nil {
			return nil, err
		}
		return strconv.ParseInt(s.String(), 10, 64)
	case 6, 12:
		var v *float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		if v == nil { // JSON has no NaN or infinities
			return math.NaN(), nil
		}
		return *v, nil
	case 7:
		var v bool
		err := json.Unmarshal(raw, &v)
		return v, err
	case 8:
		var v string
		err := json.Unmarshal(raw, &v)
		return v, err
	}
	return nil, fmt.Errorf("value type %d not supported", t)
}

// unquote strips the quotes of a BigInt sent as a JSON string.
func unquote(raw json.RawMessage) json.RawMessage {
	if len(raw) >= 2 && raw[0] == '"' {
		return raw[1 : len(raw)-1]
	}
	return raw
}
