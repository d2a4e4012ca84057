package peers

import (
	"fmt"
	"strconv"
)

// GGUFTensor is one tensor as @huggingface/gguf reads it.
type GGUFTensor struct {
	Name   string
	Type   uint32  // ggml type id
	Dims   []int64 // ggml ne order: Dims[0] is the row length
	Offset uint64  // relative to the data section
}

// GGUFTensors lists the tensors of a GGUF file, in file order, as the
// independent @huggingface/gguf reader sees them.
func GGUFTensors(path string) ([]GGUFTensor, error) {
	var r struct {
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
	out := make([]GGUFTensor, len(r.Tensors))
	for i, t := range r.Tensors {
		out[i] = GGUFTensor{Name: t.Name, Type: t.Type, Dims: make([]int64, len(t.Dims))}
		for j, d := range t.Dims {
			v, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("peers: @huggingface/gguf on %s: tensor %q: bad dim %q", path, t.Name, d)
			}
			out[i].Dims[j] = v
		}
		off, err := strconv.ParseUint(t.Offset, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("peers: @huggingface/gguf on %s: tensor %q: bad offset %q", path, t.Name, t.Offset)
		}
		out[i].Offset = off
	}
	return out, nil
}
