package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// benchLlama is a llama config; big is the 706.8M-parameter TinyLlama body
// with a 512-token vocabulary that peers.md §3 measured llama.cpp on.
func benchLlama(big bool) model.Config {
	c := model.Config{
		Arch: model.Llama, VocabSize: 512, Hidden: 512, Layers: 4, FFN: 1408,
		Heads: 8, KVHeads: 2, HeadDim: 64, ContextLength: 2048,
		RMSEps: 1e-5, RopeTheta: 10000, RopeDim: 64, BOS: 1, EOS: 2,
	}
	if big {
		c.Hidden, c.Layers, c.FFN, c.Heads, c.KVHeads = 2048, 16, 5632, 32, 4
	}
	c.LayerKinds = make([]model.LayerKind, c.Layers)
	return c
}

// fastRandomModel fills every matrix with random bytes of typ directly
// (no float intermediate), so the 700M model builds in seconds.
func fastRandomModel(b testing.TB, cfg model.Config, typ gguf.Type) *model.Model {
	rng := rand.New(rand.NewPCG(1, 2))
	var tensors []*model.Tensor
	for _, s := range model.ExpectedTensors(cfg) {
		if len(s.Dims) == 1 {
			v := make([]byte, 4*s.Dims[0])
			for i := int64(0); i < s.Dims[0]; i++ {
				binary.LittleEndian.PutUint32(v[4*i:], math.Float32bits(1))
			}
			tensors = append(tensors, model.NewTensor(s.Name, s.Dims, gguf.F32, v))
			continue
		}
		cols, rows := s.Dims[0], s.Dims[1]
		rb, err := typ.RowBytes(cols)
		if err != nil {
			b.Fatal(err)
		}
		data := make([]byte, rb*rows)
		scale := float32(1 / math.Sqrt(float64(cols)))
		if strings.HasPrefix(s.Name, "token_embd") {
			scale = 1
		}
		fill(rng, typ, data, scale)
		tensors = append(tensors, model.NewTensor(s.Name, s.Dims, typ, data))
	}
	m, err := model.New(cfg, tensors)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func fill(rng *rand.Rand, typ gguf.Type, data []byte, scale float32) {
	u := func() float32 { return scale * (2*float32(rng.Uint32()>>8)/(1<<24) - 1) * 1.7 }
	switch typ {
	case gguf.F32:
		for i := 0; i < len(data); i += 4 {
			binary.LittleEndian.PutUint32(data[i:], math.Float32bits(u()))
		}
	case gguf.F16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], half.F32ToF16(u()))
		}
	case gguf.BF16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], half.F32ToBF16(u()))
		}
	case gguf.Q8_0:
		for i := 0; i < len(data); i += 34 {
			binary.LittleEndian.PutUint16(data[i:], half.F32ToF16(scale*1.7/127))
			for j := 2; j < 34; j += 8 {
				binary.LittleEndian.PutUint64(data[i+j:], rng.Uint64())
			}
		}
	case gguf.Q1_0:
		for i := 0; i < len(data); i += 18 {
			binary.LittleEndian.PutUint16(data[i:], half.F32ToF16(scale))
			for j := 2; j < 18; j += 8 {
				binary.LittleEndian.PutUint64(data[i+j:], rng.Uint64())
			}
		}
	}
}

// benchModel caches the last model fastRandomModel built, so that the
// rounds of one sub-benchmark (N=1, then N) build the 700M model once.
var benchModel struct {
	big bool
	typ gguf.Type
	m   *model.Model
}

func cachedModel(b *testing.B, big bool, typ gguf.Type) *model.Model {
	if benchModel.m == nil || benchModel.big != big || benchModel.typ != typ {
		benchModel.m = nil // let the old model go before building the next
		benchModel.m, benchModel.big, benchModel.typ = fastRandomModel(b, benchLlama(big), typ), big, typ
	}
	return benchModel.m
}

// reportSpeed reports tokens per wall second ("tok/s"), the process CPU
// time per token ("cpu-ms/tok") and the speed the CPU time would allow on
// threads cores of our own ("cpu-tok/s" = tokens / (CPU seconds /
// threads)): on a shared machine wall time mostly measures the others.
func reportSpeed(b *testing.B, tokens int, cpu time.Duration, threads int) {
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
	if cpu > 0 {
		b.ReportMetric(cpu.Seconds()*1e3/float64(tokens), "cpu-ms/tok")
		b.ReportMetric(float64(tokens)/(cpu.Seconds()/float64(threads)), "cpu-tok/s")
	}
}

// BenchmarkDecode measures single-token decode speed (tokens/s) of a
// synthetic llama. QNNPREP_BENCH_700M=1 adds the 700M model (needs about
// 3 GB for F32 and a minute to build); QNNPREP_BENCH_THREADS sets threads.
func BenchmarkDecode(b *testing.B) {
	benchModels(b, func(b *testing.B, e *Engine, threads int) {
		st := e.NewState()
		tok := []int32{1}
		if _, err := st.Forward(tok); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		c0 := cpubench.Process()
		for i := 0; i < b.N; i++ {
			if st.Len() >= 256 {
				st.Reset()
			}
			l, err := st.Forward(tok)
			if err != nil {
				b.Fatal(err)
			}
			tok[0] = Argmax(l)
		}
		reportSpeed(b, b.N, cpubench.Process()-c0, threads)
	})
}

// BenchmarkPrefill measures prompt processing (64 tokens in batches of 32)
// in tokens/s, on the same models as BenchmarkDecode.
func BenchmarkPrefill(b *testing.B) {
	prompt := randomTokens(64, 512, 3)
	benchModels(b, func(b *testing.B, e *Engine, threads int) {
		st := e.NewState()
		b.ReportAllocs()
		b.ResetTimer()
		c0 := cpubench.Process()
		for i := 0; i < b.N; i++ {
			st.Reset()
			if _, err := st.Forward(prompt); err != nil {
				b.Fatal(err)
			}
		}
		reportSpeed(b, b.N*len(prompt), cpubench.Process()-c0, threads)
	})
}

// benchModels runs f in a sub-benchmark per model size and weight type
// (small/F32 ... 700M/Q1_0) on an engine with benchThreads threads.
func benchModels(b *testing.B, f func(b *testing.B, e *Engine, threads int)) {
	sizes := []bool{false}
	if os.Getenv("QNNPREP_BENCH_700M") != "" {
		sizes = append(sizes, true)
	}
	threads := benchThreads(b)
	for _, big := range sizes {
		name := "small"
		if big {
			name = "700M"
		}
		for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q1_0} {
			b.Run(name+"/"+typ.String(), func(b *testing.B) {
				e, err := New(cachedModel(b, big, typ), Options{Threads: threads, Context: 512})
				if err != nil {
					b.Fatal(err)
				}
				f(b, e, threads)
			})
		}
	}
}

// benchThreads is QNNPREP_BENCH_THREADS, or 2.
func benchThreads(b *testing.B) int {
	threads := 2
	if v := os.Getenv("QNNPREP_BENCH_THREADS"); v != "" {
		if _, err := fmt.Sscan(v, &threads); err != nil {
			b.Fatal(err)
		}
	}
	return threads
}
