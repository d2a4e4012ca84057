package scaleout

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/int8"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// nineBLayer is one layer of a 9B-class decoder (hidden 4096, FFN 12288,
// 32 query and 8 KV heads of 128): its weight matrices as rows × columns.
var nineBLayer = [][2]int{{4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096}, {12288, 4096}, {12288, 4096}, {4096, 12288}}

// bigBundle is a fake-SDK bundle whose context binaries are replaced by
// INT8 per-channel weights (ggml Q8_0 blocks, as the qmodel and QNN hold
// them) of Gaussian values, layers of the 9B shape spread over the
// bundle's four stages; $QNNPREP_BENCH_LAYERS sets how many (default 1,
// 206 MB; the 9B model has 36).
func bigBundle(b *testing.B) (string, int64) {
	layers := 1
	if v := os.Getenv("QNNPREP_BENCH_LAYERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("QNNPREP_BENCH_LAYERS=%q", v)
		}
		layers = n
	}
	dir := testBundle(b)
	mp := filepath.Join(dir, qnnpack.ManifestName)
	mb, err := os.ReadFile(mp)
	if err != nil {
		b.Fatal(err)
	}
	m, err := qnnpack.ParseManifest(mb, mp)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var total int64
	for s, st := range m.Stages {
		f, err := os.Create(filepath.Join(dir, st.Binary))
		if err != nil {
			b.Fatal(err)
		}
		for l := s; l < layers; l += len(m.Stages) {
			for _, mat := range nineBLayer {
				rows, cols := mat[0], mat[1]
				src := make([]float32, cols)
				dst := make([]byte, cols/32*34)
				for range rows {
					for i := range src {
						src[i] = float32(rng.NormFloat64() * 0.02)
					}
					int8.QuantizeRowPerChannel(src, dst)
					if _, err := f.Write(dst); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if err := qnnpack.WriteManifest(dir, m); err != nil {
		b.Fatal(err)
	}
	for _, f := range m.Files {
		total += f.Size
	}
	return dir, total
}

// BenchmarkPackUnpack packs and unpacks the big bundle; it reports the
// archive's size as a fraction of the bundle's, MB/s of bundle bytes, and
// MB per second of the process's CPU time (cpu-MB/s), which a machine
// shared with other work does not distort.
//
//	QNNPREP_BENCH_LAYERS=8 go test -run '^$' -bench PackUnpack -benchtime 1x ./scaleout
func BenchmarkPackUnpack(b *testing.B) {
	dir, total := bigBundle(b)
	pack := filepath.Join(b.TempDir(), "bundle.tar.zst")
	b.Run("pack", func(b *testing.B) {
		b.SetBytes(total)
		c0 := cpubench.Process()
		for b.Loop() {
			if _, err := PackFile(context.Background(), dir, pack); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, total, cpubench.Process()-c0)
		fi, err := os.Stat(pack)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(fi.Size())/float64(total), "ratio")
	})
	b.Run("unpack", func(b *testing.B) {
		b.SetBytes(total)
		c0 := cpubench.Process()
		for i := 0; b.Loop(); i++ {
			if _, err := UnpackFile(context.Background(), pack, filepath.Join(b.TempDir(), "out"+strconv.Itoa(i))); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, total, cpubench.Process()-c0)
	})
}

func reportCPU(b *testing.B, bytes int64, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/cpu.Seconds()/1e6, "cpu-MB/s")
	}
}
