package pipeline

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/safetensors"
	"github.com/qnnprep/qnnprep/shard"
)

func writeRows(t *testing.T, path string, rows, hidden int, seed uint64) []float32 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	v := make([]float32, rows*hidden)
	b := make([]byte, 0, 4*len(v))
	for i := range v {
		v[i] = float32(rng.NormFloat64())
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v[i]))
	}
	w := &safetensors.Writer{Tensors: []safetensors.WriterTensor{{Name: "forecast_embedding", Dtype: safetensors.F32, Shape: []int64{int64(rows), int64(hidden)}, Data: safetensors.Bytes(b)}}}
	if err := safetensors.WriteFile(path, w); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSSDDryRun: an ssd-q1 build takes the trained forecast embeddings
// (checked before anything is built), puts them into the first stage's
// table and the bundle next to the forecast prefix, and its verify step
// decodes the dialog through the plan to the whole model's tokens.
func TestSSDDryRun(t *testing.T) {
	src, cfg := synthLlama(t)
	dir := t.TempDir()
	o := options(t, src, filepath.Join(dir, "out"), "int8")
	o.Plan.Dialog = shard.Dialog{Type: shard.SSD, ForecastTokenCount: 3, Branches: []int{2, 1}, ForecastPrefix: 8, ForecastPrefixName: "forecast-prefix"}

	short := filepath.Join(dir, "short.safetensors")
	writeRows(t, short, 2, cfg.Hidden, 1)
	for _, tc := range []struct{ file, want string }{
		{"", "dialog ssd-q1 needs its 3 trained forecast-token embeddings of hidden size 256 (--forecast-embeddings FILE"},
		{short, `short.safetensors: tensor "forecast_embedding" holds 2 rows of 256 values, want forecast-token-count 3`},
	} {
		bad := o
		bad.OutDir = filepath.Join(dir, "bad")
		bad.ForecastEmbeddings = tc.file
		res, err := Build(context.Background(), bad)
		if err == nil || !strings.HasPrefix(err.Error(), "quantize: ") || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("forecast %q: %v, want %q", tc.file, err, tc.want)
		}
		if _, serr := os.Stat(filepath.Join(bad.OutDir, WorkDir, QModelName)); serr == nil || res.Step(StepPlan).Status != StatusNotRun {
			t.Errorf("forecast %q: the build went on after the check", tc.file)
		}
	}

	good := filepath.Join(dir, "forecast.safetensors")
	rows := writeRows(t, good, 3, cfg.Hidden, 2)
	o.ForecastEmbeddings = good
	res, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Step(StepExport); !strings.Contains(s.Note, "3 forecast rows in the embedding table") {
		t.Errorf("export note %q", s.Note)
	}
	// The bundle holds the rows as the table does, and the prefix.
	qm, err := model.Open(filepath.Join(o.OutDir, WorkDir, QModelName))
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Close()
	want, err := onnx.ForecastRows(qm.Tensor("token_embd.weight"), res.Plan.Container, rows)
	if err != nil {
		t.Fatal(err)
	}
	got, err := model.ReadForecastEmbeddings(filepath.Join(res.Bundle, qnnpack.ForecastEmbeddingsName), cfg.Hidden, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Error("bundle's forecast rows differ from the embedding table's")
	}
	m, err := qnnpack.VerifyBundleFiles(res.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{qnnpack.ForecastEmbeddingsName, "forecast-prefix/" + qnnpack.ForecastPrefixFile} {
		if !slices.ContainsFunc(m.Files, func(mf qnnpack.ManifestFile) bool { return mf.Path == f }) {
			t.Errorf("manifest lacks %s", f)
		}
	}
	v := res.Verify
	if v.Speculative == nil || v.SpeculativeEqualsWhole == nil || !*v.SpeculativeEqualsWhole || v.Speculative.Speculative == nil {
		t.Fatalf("ssd verify %+v", v)
	}
	if sr := v.Speculative.Speculative; sr.K != 4 || sr.Windows == 0 {
		t.Errorf("ssd report %+v: want 4 draft nodes per call", sr)
	}
	if !res.Pass() || !strings.Contains(res.Step(StepVerify).Note, "ssd-q1 == whole") {
		t.Errorf("pass %v, verify note %q", res.Pass(), res.Step(StepVerify).Note)
	}
}
