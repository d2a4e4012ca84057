package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/safetensors"
)

// writeForecastFile writes rows random-ish forecast embeddings of hidden
// values as safetensors.
func writeForecastFile(t *testing.T, rows, hidden int) string {
	t.Helper()
	b := make([]byte, 0, 4*rows*hidden)
	for i := range rows * hidden {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(math.Sin(float64(i)*0.37))))
	}
	path := filepath.Join(t.TempDir(), "forecast.safetensors")
	w := &safetensors.Writer{Tensors: []safetensors.WriterTensor{{Name: "forecast_embedding", Dtype: safetensors.F32, Shape: []int64{int64(rows), int64(hidden)}, Data: safetensors.Bytes(b)}}}
	if err := safetensors.WriteFile(path, w); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBuildSSD: --forecast-embeddings puts the forecast rows into the
// ssd-q1 bundle (and is required by the dialog), --forecast-prefix-file
// becomes the bundle's forecast prefix instead of the zero placeholder,
// and verify decodes the dialog through the plan to the whole model's
// tokens.
func TestBuildSSD(t *testing.T) {
	src := synthLlamaGGUF(t) // hidden 256, 2 layers, 2 KV heads of 64
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	dialog := []string{"--dialog", "ssd-q1", "--forecast-token-count", "2", "--branches", "2,1", "--forecast-prefix", "8", "--forecast-prefix-name", "fp"}
	base := append([]string{"--recipe", "int8", "--ar", "32,1", "--cl", "128", "--calibrate", "0", "-n", "6", "-q"}, dialog...)

	out := filepath.Join(t.TempDir(), "out")
	var code int
	stderr := captureStderr(t, func() { captureStdout(t, func() { code = run(append([]string{"build", src, out}, base...)) }) })
	if code == 0 || !strings.Contains(stderr, "--forecast-embeddings FILE") {
		t.Errorf("ssd-q1 without forecast embeddings: exit %d\n%s", code, stderr)
	}

	// A prefix file: 4 tensors × 2 heads × 64 dims × 8 positions of u8.
	var prefix bytes.Buffer
	hdr := make([]byte, 16)
	binary.LittleEndian.PutUint32(hdr[0:], 4)
	binary.LittleEndian.PutUint32(hdr[4:], qnnpack.CacheMagic)
	binary.LittleEndian.PutUint16(hdr[10:], 2)
	binary.LittleEndian.PutUint16(hdr[12:], 64)
	binary.LittleEndian.PutUint16(hdr[14:], 8)
	prefix.Write(hdr)
	for i := range 4 * 2 * 64 * 8 {
		prefix.WriteByte(byte(i * 7))
	}
	prefixPath := filepath.Join(t.TempDir(), "prefix.qnn-htp")
	if err := os.WriteFile(prefixPath, prefix.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, withPrefix := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"build", src, out, "--forecast-embeddings", writeForecastFile(t, 2, 256)}, base...)
		if withPrefix {
			args = append(args, "--forecast-prefix-file", prefixPath)
		}
		stdout := captureStdout(t, func() { code = run(args) })
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stdout)
		}
		for _, want := range []string{"2 forecast rows in the embedding table", "qmodel ssd-q1 (staged)", "drafts accepted per target call", "result: PASS"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("summary lacks %q:\n%s", want, stdout)
			}
		}
		if _, err := os.Stat(filepath.Join(out, "bundle", qnnpack.ForecastEmbeddingsName)); err != nil {
			t.Error(err)
		}
		got, err := os.ReadFile(filepath.Join(out, "bundle", "fp", qnnpack.ForecastPrefixFile))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(got, prefix.Bytes()) != withPrefix {
			t.Errorf("--forecast-prefix-file given %v, bundle prefix equal to it %v", withPrefix, !withPrefix)
		}
	}
}
