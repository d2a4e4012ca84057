package model

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/safetensors"
)

// ReadForecastEmbeddings reads the trained forecast-token embeddings of an
// ssd-q1 dialog (qnn-genie.md §1.4: token vocab+i embeds as row i) from a
// .safetensors or .gguf file: one tensor of count rows of hidden values
// (safetensors shape [count, hidden], GGUF dims [hidden, count]) in F32,
// F16 or BF16. A file with several tensors must name one of them with
// "forecast" in its name. It returns count·hidden values, row after row.
func ReadForecastEmbeddings(path string, hidden, count int) ([]float32, error) {
	if hidden <= 0 || count <= 0 {
		return nil, fmt.Errorf("model: forecast embeddings %s: hidden %d and forecast-token-count %d must be positive", path, hidden, count)
	}
	if strings.EqualFold(filepath.Ext(path), ".gguf") {
		return forecastGGUF(path, hidden, count)
	}
	return forecastSafetensors(path, hidden, count)
}

// pickForecast chooses the embedding tensor among names.
func pickForecast(path string, names []string) (string, error) {
	if len(names) == 1 {
		return names[0], nil
	}
	var hits []string
	for _, n := range names {
		if strings.Contains(strings.ToLower(n), "forecast") {
			hits = append(hits, n)
		}
	}
	if len(hits) != 1 {
		slices.Sort(names)
		return "", fmt.Errorf("model: forecast embeddings %s: %d tensors (%s), want one, or exactly one whose name contains \"forecast\"", path, len(names), strings.Join(names, ", "))
	}
	return hits[0], nil
}

func checkForecastShape(path, name string, rows, cols int64, hidden, count int) error {
	if cols != int64(hidden) || rows != int64(count) {
		return fmt.Errorf("model: forecast embeddings %s: tensor %q holds %d rows of %d values, want forecast-token-count %d rows of hidden size %d", path, name, rows, cols, count, hidden)
	}
	return nil
}

func forecastSafetensors(path string, hidden, count int) ([]float32, error) {
	st, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: forecast embeddings: %w", err)
	}
	defer st.Close()
	var names []string
	for _, t := range st.Tensors {
		names = append(names, t.Name)
	}
	name, err := pickForecast(path, names)
	if err != nil {
		return nil, err
	}
	ti, _ := st.Tensor(name)
	if len(ti.Shape) != 2 {
		return nil, fmt.Errorf("model: forecast embeddings %s: tensor %q has shape %v, want [forecast-token-count %d, hidden %d]", path, name, ti.Shape, count, hidden)
	}
	if err := checkForecastShape(path, name, ti.Shape[0], ti.Shape[1], hidden, count); err != nil {
		return nil, err
	}
	switch ti.Dtype {
	case safetensors.F32, safetensors.F16, safetensors.BF16:
	default:
		return nil, fmt.Errorf("model: forecast embeddings %s: tensor %q has dtype %s, want F32, F16 or BF16", path, name, ti.Dtype)
	}
	out := make([]float32, count*hidden)
	if err := st.Float32(name, out); err != nil {
		return nil, fmt.Errorf("model: forecast embeddings %s: %w", path, err)
	}
	return out, checkFinite(path, name, out, hidden)
}

func forecastGGUF(path string, hidden, count int) ([]float32, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: forecast embeddings: %w", err)
	}
	defer f.Close()
	var names []string
	for _, t := range f.Tensors {
		names = append(names, t.Name)
	}
	name, err := pickForecast(path, names)
	if err != nil {
		return nil, err
	}
	ti, _ := f.Tensor(name)
	if len(ti.Dims) != 2 {
		return nil, fmt.Errorf("model: forecast embeddings %s: tensor %q has dims %v, want [hidden %d, forecast-token-count %d]", path, name, ti.Dims, hidden, count)
	}
	if err := checkForecastShape(path, name, ti.Dims[1], ti.Dims[0], hidden, count); err != nil {
		return nil, err
	}
	switch ti.Type {
	case gguf.F32, gguf.F16, gguf.BF16:
	default:
		return nil, fmt.Errorf("model: forecast embeddings %s: tensor %q has type %s, want F32, F16 or BF16", path, name, ti.Type)
	}
	data, err := f.Data(ti)
	if err != nil {
		return nil, fmt.Errorf("model: forecast embeddings %s: %w", path, err)
	}
	out := make([]float32, count*hidden)
	if err := gguf.Dequantize(ti.Type, data, out); err != nil {
		return nil, fmt.Errorf("model: forecast embeddings %s: tensor %q: %w", path, name, err)
	}
	return out, checkFinite(path, name, out, hidden)
}

func checkFinite(path, name string, v []float32, hidden int) error {
	for i, x := range v {
		if x-x != 0 {
			return fmt.Errorf("model: forecast embeddings %s: tensor %q row %d holds %v", path, name, i/hidden, x)
		}
	}
	return nil
}
