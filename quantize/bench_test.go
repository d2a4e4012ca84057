package quantize

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/safetensors"
)

// randBF16 streams n pseudo-random BF16 values (deterministic, about
// N(0, 0.02)) without holding them in memory.
type randBF16 struct {
	n    int64
	seed uint64
}

func (r randBF16) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	s := r.seed*0x9e3779b97f4a7c15 + 1
	var buf [2]byte
	for i := int64(0); i < r.n; i++ {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		// Sum of two uniforms: a cheap bell shape, scaled to weight size.
		u := float32(s>>40)/float32(1<<24) + float32(s&0xffffff)/float32(1<<24) - 1
		binary.LittleEndian.PutUint16(buf[:], half.F32ToBF16(u*0.04))
		if _, err := bw.Write(buf[:]); err != nil {
			return 0, err
		}
	}
	return 2 * r.n, bw.Flush()
}

// writeBF16Llama writes an HF llama checkpoint of BF16 weights.
func writeBF16Llama(dir string, hidden, ffn, layers, vocab int) error {
	cfg := map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": layers,
		"num_attention_heads": hidden / 128, "num_key_value_heads": hidden / 128,
		"vocab_size": vocab, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
		"rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		return err
	}
	w := &safetensors.Writer{}
	seed := uint64(1)
	add := func(name string, shape ...int64) {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		w.Tensors = append(w.Tensors, safetensors.WriterTensor{Name: name, Dtype: "BF16", Shape: shape, Data: randBF16{n, seed}})
		seed++
	}
	h, f := int64(hidden), int64(ffn)
	add("model.embed_tokens.weight", int64(vocab), h)
	add("lm_head.weight", int64(vocab), h)
	add("model.norm.weight", h)
	for l := 0; l < layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", h)
		add(p+"post_attention_layernorm.weight", h)
		for _, m := range []string{"q_proj", "k_proj", "v_proj", "o_proj"} {
			add(p+"self_attn."+m+".weight", h, h)
		}
		add(p+"mlp.gate_proj.weight", f, h)
		add(p+"mlp.up_proj.weight", f, h)
		add(p+"mlp.down_proj.weight", h, f)
	}
	return safetensors.WriteSharded(dir, w, 4)
}

// BenchmarkQuantize4GiB quantizes a 4 GiB BF16 llama checkpoint (hidden
// 4096, FFN 11008, 9 layers, vocab 32000) with q1 and q8_0 in a child
// process, and reports source GB/s and the child's peak RSS against the
// bound 2 × largest tensor + 256 MiB. It writes about 5 GiB to a temp dir,
// so it runs only with QNNPREP_BENCH_LARGE=1. With TMPDIR=/dev/shm the
// source and output live in memory, which measures the pipeline rather
// than the disk (this machine's disk writes about 0.2–0.35 GB/s).
func BenchmarkQuantize4GiB(b *testing.B) {
	if os.Getenv("QNNPREP_BENCH_LARGE") != "1" {
		b.Skip("set QNNPREP_BENCH_LARGE=1 to write and quantize a 4 GiB checkpoint")
	}
	dir := b.TempDir()
	// QNNPREP_BENCH_SRC names a directory that keeps the checkpoint
	// between runs (written on first use), which saves regenerating it.
	src := os.Getenv("QNNPREP_BENCH_SRC")
	if src == "" {
		src = filepath.Join(dir, "src")
	}
	if _, err := os.Stat(filepath.Join(src, "config.json")); err != nil {
		os.MkdirAll(src, 0o755)
		start := time.Now()
		if err := writeBF16Llama(src, 4096, 11008, 9, 32000); err != nil {
			b.Fatal(err)
		}
		b.Logf("wrote the checkpoint in %v", time.Since(start))
	}
	m, err := model.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	var total, largest int64
	for _, t := range m.Tensors {
		total += t.Bytes()
		largest = max(largest, t.Bytes())
	}
	m.Close()
	bound := 2*largest + 256<<20
	b.Logf("source %.2f GiB, largest tensor %d MiB, RSS bound %d MiB", float64(total)/(1<<30), largest>>20, bound>>20)
	for _, recipe := range []string{"q1", "q8_0"} {
		b.Run(recipe, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cmd := exec.Command(os.Args[0], "-test.run=^TestQuantizeChild$")
				cmd.Env = append(os.Environ(), "QNNPREP_QUANTIZE_CHILD="+src+"|"+filepath.Join(dir, recipe+".gguf")+"|"+recipe)
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("child: %v\n%s", err, out)
				}
				var secs float64
				var hwm int64
				for _, line := range strings.Split(string(out), "\n") {
					if v, ok := strings.CutPrefix(line, "SECONDS "); ok {
						secs, _ = strconv.ParseFloat(v, 64)
					}
					if v, ok := strings.CutPrefix(line, "VMHWM_KB "); ok {
						hwm, _ = strconv.ParseInt(v, 10, 64)
						hwm <<= 10
					}
				}
				ps := cmd.ProcessState
				b.Logf("%s: %.2f s, %.2f GB/s of source, child CPU user %.2f s sys %.2f s (whole process), peak RSS %d MiB (bound %d MiB)",
					recipe, secs, float64(total)/secs/1e9, ps.UserTime().Seconds(), ps.SystemTime().Seconds(), hwm>>20, bound>>20)
				b.ReportMetric((ps.UserTime() + ps.SystemTime()).Seconds(), "child-cpu-s")
				b.ReportMetric(float64(total)/secs/1e9, "src-GB/s")
				b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MiB")
				b.ReportMetric(float64(bound)/(1<<20), "bound-MiB")
				if hwm > bound {
					b.Errorf("peak RSS %d MiB over the bound %d MiB", hwm>>20, bound>>20)
				}
			}
		})
	}
}

// TestQuantizeChild is the benchmark's child process; it does nothing in
// a normal test run.
func TestQuantizeChild(t *testing.T) {
	spec := os.Getenv("QNNPREP_QUANTIZE_CHILD")
	if spec == "" {
		t.Skip("helper process for BenchmarkQuantize4GiB")
	}
	parts := strings.Split(spec, "|")
	m, err := model.Open(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rep, err := Run(context.Background(), m, parts[1], Options{Recipe: Recipes[parts[2]]})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("SECONDS %f\n", rep.Seconds)
	fmt.Printf("VMHWM_KB %d\n", vmHWM())
}

// vmHWM is this process's peak resident set in KiB (Linux).
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return math.MaxInt64
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return math.MaxInt64
}
