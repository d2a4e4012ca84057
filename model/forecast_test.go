package model

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/safetensors"
)

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func writeForecastST(t testing.TB, path string, ts ...safetensors.WriterTensor) {
	t.Helper()
	if err := safetensors.WriteFile(path, &safetensors.Writer{Tensors: ts}); err != nil {
		t.Fatal(err)
	}
}

// TestReadForecastEmbeddings: rows come back in order from either form;
// a wrong shape, dtype or tensor choice is an error naming the file, the
// tensor and what was expected.
func TestReadForecastEmbeddings(t *testing.T) {
	dir := t.TempDir()
	const hidden, count = 8, 3
	rows := make([]float32, hidden*count)
	for i := range rows {
		rows[i] = float32(i)*0.25 - 2
	}
	st := filepath.Join(dir, "fc.safetensors")
	writeForecastST(t, st, safetensors.WriterTensor{Name: "forecast_embedding", Dtype: safetensors.F32, Shape: []int64{count, hidden}, Data: safetensors.Bytes(f32Bytes(rows))})
	gg := filepath.Join(dir, "fc.gguf")
	if err := gguf.WriteFile(gg, &gguf.Writer{Tensors: []gguf.WriterTensor{{Name: "forecast.weight", Dims: []int64{hidden, count}, Type: gguf.F32, Data: gguf.Bytes(f32Bytes(rows))}}}); err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(dir, "two.safetensors")
	writeForecastST(t, two,
		safetensors.WriterTensor{Name: "other", Dtype: safetensors.F32, Shape: []int64{1}, Data: safetensors.Bytes(f32Bytes([]float32{1}))},
		safetensors.WriterTensor{Name: "model.forecast_embeddings", Dtype: safetensors.F32, Shape: []int64{count, hidden}, Data: safetensors.Bytes(f32Bytes(rows))})
	for _, p := range []string{st, gg, two} {
		got, err := ReadForecastEmbeddings(p, hidden, count)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			if got[i] != rows[i] {
				t.Fatalf("%s: value %d = %v, want %v", p, i, got[i], rows[i])
			}
		}
	}
	ambiguous := filepath.Join(dir, "ambiguous.safetensors")
	writeForecastST(t, ambiguous,
		safetensors.WriterTensor{Name: "a", Dtype: safetensors.F32, Shape: []int64{1}, Data: safetensors.Bytes(f32Bytes([]float32{1}))},
		safetensors.WriterTensor{Name: "b", Dtype: safetensors.F32, Shape: []int64{1}, Data: safetensors.Bytes(f32Bytes([]float32{1}))})
	ints := filepath.Join(dir, "ints.safetensors")
	writeForecastST(t, ints, safetensors.WriterTensor{Name: "f", Dtype: safetensors.I32, Shape: []int64{count, hidden}, Data: safetensors.Bytes(make([]byte, 4*hidden*count))})
	nan := filepath.Join(dir, "nan.safetensors")
	bad := append([]float32(nil), rows...)
	bad[hidden+1] = float32(math.NaN())
	writeForecastST(t, nan, safetensors.WriterTensor{Name: "f", Dtype: safetensors.F32, Shape: []int64{count, hidden}, Data: safetensors.Bytes(f32Bytes(bad))})
	junk := filepath.Join(dir, "junk.gguf")
	if err := os.WriteFile(junk, []byte("GGUF\x03\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path          string
		hidden, count int
		want          string
	}{
		{st, 16, count, `tensor "forecast_embedding" holds 3 rows of 8 values, want forecast-token-count 3 rows of hidden size 16`},
		{st, hidden, 4, "want forecast-token-count 4 rows"},
		{gg, hidden, 2, `tensor "forecast.weight" holds 3 rows of 8 values`},
		{ambiguous, hidden, count, `2 tensors (a, b), want one`},
		{ints, hidden, count, "dtype I32, want F32, F16 or BF16"},
		{nan, hidden, count, `row 1 holds NaN`},
		{junk, hidden, count, "junk.gguf"},
		{filepath.Join(dir, "missing.safetensors"), hidden, count, "missing.safetensors"},
		{st, 0, count, "must be positive"},
	} {
		_, err := ReadForecastEmbeddings(tc.path, tc.hidden, tc.count)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Base(tc.path)) {
			t.Errorf("%s (hidden %d, count %d): %v, want %q", filepath.Base(tc.path), tc.hidden, tc.count, err, tc.want)
		}
	}
}

// FuzzReadForecastEmbeddings: any bytes as either form are an error or
// count·hidden finite values, never a panic.
func FuzzReadForecastEmbeddings(f *testing.F) {
	f.Add([]byte("GGUF"), true)
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '}, false)
	f.Fuzz(func(t *testing.T, data []byte, isGGUF bool) {
		name := "f.safetensors"
		if isGGUF {
			name = "f.gguf"
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		v, err := ReadForecastEmbeddings(p, 4, 2)
		if err == nil && len(v) != 8 {
			t.Fatalf("%d values, want 8", len(v))
		}
	})
}
