package onnx

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// lazyQ1 is a Q1_0 tensor whose bytes are generated on demand: random
// sign bits (splitmix64 of the tensor seed) and a fixed block scale.
func lazyQ1(name string, dims []int64, seed uint64) *model.Tensor {
	return model.LazyTensor(name, dims, gguf.Q1_0, func() ([]byte, error) {
		n := dims[0] * dims[1] / 128
		b := make([]byte, n*18)
		d := half.F32ToF16(0.02)
		x := seed
		for i := int64(0); i < n; i++ {
			blk := b[i*18 : (i+1)*18]
			binary.LittleEndian.PutUint16(blk, d)
			for j := 2; j < 18; j += 8 {
				x += 0x9e3779b97f4a7c15
				z := x
				z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
				z = (z ^ z>>27) * 0x94d049bb133111eb
				binary.LittleEndian.PutUint64(blk[j:], z^z>>31)
			}
		}
		return b, nil
	})
}

// TestLargeStageExternalData exports a one-stage llama whose float32
// weights are 3 GiB (4 layers of hidden 4096 and ffn 11008, Q1_0 weights
// generated on the fly and streamed one tensor at a time) and runs the
// ONNX checker on it: initializers go to the external .data file, past
// protobuf's 2 GiB limit, and the model still passes full_check.
func TestLargeStageExternalData(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 3 GiB model (about a minute); skipped with -short")
	}
	testkit.Need(t, peers.PythonONNX)
	cfg := model.Config{
		Arch: model.Llama, VocabSize: 256, Hidden: 4096, Layers: 4, FFN: 11008,
		Heads: 32, KVHeads: 32, HeadDim: 128, ContextLength: 64,
		RMSEps: 1e-5, RopeTheta: 10000, RopeDim: 128, BOS: 1, EOS: 2,
		LayerKinds: make([]model.LayerKind, 4),
	}
	var tensors []*model.Tensor
	for i, s := range model.ExpectedTensors(cfg) {
		if len(s.Dims) == 2 {
			tensors = append(tensors, lazyQ1(s.Name, s.Dims, uint64(i)))
			continue
		}
		ones := make([]byte, 4*s.Dims[0])
		for j := range s.Dims[0] {
			binary.LittleEndian.PutUint32(ones[4*j:], math.Float32bits(1))
		}
		tensors = append(tensors, model.NewTensor(s.Name, s.Dims, gguf.F32, ones))
	}
	m, err := model.New(cfg, tensors)
	if err != nil {
		t.Fatal(err)
	}
	p, err := shard.NewPlan(cfg, shard.Sizes{Layers: make([]int64, cfg.Layers)}, "big", shard.Options{Stages: 1, AR: []int{1}, CL: []int{8}})
	if err != nil {
		t.Fatal(err)
	}
	g, enc, err := BuildStage(m, p, &p.Graphs[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.InitBytes() < 3<<30 {
		t.Fatalf("stage holds %d bytes of weights, want ≥ 3 GiB", g.InitBytes())
	}
	path := filepath.Join(t.TempDir(), p.Graphs[0].Name+".onnx")
	start := time.Now()
	if err := g.WriteFile(path, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	wrote := time.Since(start)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.Stat(path + ".data")
	if err != nil {
		t.Fatalf("no external data written: %v", err)
	}
	if st.Size() > 1<<20 || data.Size() < 3<<30 {
		t.Fatalf("model %d bytes, data %d bytes; want a small model and ≥ 3 GiB of data", st.Size(), data.Size())
	}
	start = time.Now()
	if err := peers.ONNXCheck(path); err != nil {
		t.Fatal(err)
	}
	t.Logf("%.2f GiB of weights written in %v (%.0f MiB/s), checker %v; %d param encodings",
		float64(data.Size())/(1<<30), wrote.Round(time.Millisecond), float64(data.Size())/(1<<20)/wrote.Seconds(),
		time.Since(start).Round(time.Millisecond), len(enc.ParamEncodings))
}

// BenchmarkMatrixBytes measures dequantizing, transposing and
// round-trip checking one 4096×11008 Q1_0 matrix (45M weights).
func BenchmarkMatrixBytes(b *testing.B) {
	t := lazyQ1("w", []int64{4096, 11008}, 1)
	enc, err := ParamEncoding(t, Container4Bit)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(4 * 4096 * 11008)
	for b.Loop() {
		if _, err := matrixBytes(t, enc, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExportInt8 exports a one-stage int8 llama qmodel (hidden 2048,
// FFN 5632, 4 layers, vocabulary 32000: 1.3 GB of float32 weights) with AR
// 128 and 1, and reports the GB of ONNX weights written per second next
// to the time it takes to read the qmodel once (every byte of every
// tensor through its mapping, pages released as the export releases
// them). The qmodel is written first, so both read it from the page cache.
func BenchmarkExportInt8(b *testing.B) {
	cfg := synth.Config(model.Llama, false)
	cfg.Hidden, cfg.FFN, cfg.Layers, cfg.VocabSize = 2048, 5632, 4, 32000
	cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.RopeDim = 16, 8, 128, 128
	cfg.ContextLength = 4096
	cfg.LayerKinds = make([]model.LayerKind, cfg.Layers)
	// QNNPREP_BENCH_QMODEL names a file that keeps the qmodel between
	// runs (written on first use).
	path := os.Getenv("QNNPREP_BENCH_QMODEL")
	if path == "" {
		path = filepath.Join(b.TempDir(), "int8.gguf")
	}
	if _, err := os.Stat(path); err != nil {
		src, err := synth.Model(cfg, 1)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := quantize.Run(context.Background(), src, path, quantize.Options{Recipe: quantize.Recipes["int8"]}); err != nil {
			b.Fatal(err)
		}
	}
	m, err := model.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	p, err := shard.NewPlan(m.Config, shard.Sizes{Layers: make([]int64, cfg.Layers)}, "bench", shard.Options{Stages: 1, AR: []int{128, 1}, CL: []int{1024}})
	if err != nil {
		b.Fatal(err)
	}
	var read, export time.Duration
	var readCPU, exportCPU float64
	var weights int64
	for b.Loop() {
		start, cpu := time.Now(), cpuSeconds()
		var x uint64
		for _, t := range m.Tensors {
			data, err := t.Data()
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i+8 <= len(data); i += 8 {
				x ^= binary.LittleEndian.Uint64(data[i:])
			}
			t.Release()
		}
		read, readCPU = read+time.Since(start), readCPU+cpuSeconds()-cpu
		if x == 1 {
			b.Log("") // keeps the loop
		}

		dir := b.TempDir()
		start, cpu = time.Now(), cpuSeconds()
		paths, err := Export(m, p, dir, ExportOptions{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		export, exportCPU = export+time.Since(start), exportCPU+cpuSeconds()-cpu
		weights = 0
		for _, path := range paths {
			if filepath.Ext(path) == ".data" {
				st, _ := os.Stat(path)
				weights += st.Size()
			}
		}
		os.RemoveAll(dir)
	}
	n := float64(b.N)
	b.ReportMetric(float64(weights)/(export.Seconds()/n)/1e9, "ONNX-GB/s")
	b.ReportMetric(export.Seconds()/n, "export-s")
	b.ReportMetric(read.Seconds()/n, "qmodel-read-s")
	// On a shared machine the wall clock measures the neighbours; the
	// process's CPU time (all threads) does not.
	b.ReportMetric(exportCPU/n, "export-cpu-s")
	b.ReportMetric(readCPU/n, "qmodel-read-cpu-s")
	b.ReportMetric(float64(weights)/1e9, "ONNX-GB")
}

// cpuSeconds is the user and system CPU time this process has used.
func cpuSeconds() float64 { return cpubench.Process().Seconds() }
