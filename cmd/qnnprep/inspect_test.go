package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/safetensors"
	"github.com/qnnprep/qnnprep/synth"
)

// inspect must list a generated checkpoint exactly: the configuration it
// was generated from and every canonical tensor with its shape and type,
// whether the checkpoint is sharded or hybrid.
func TestInspectListsSyntheticCheckpointsExactly(t *testing.T) {
	cases := []struct {
		arch   model.Arch
		shards int
	}{
		{model.Qwen3, 3},
		{model.Qwen35, 1},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s-%d-shards", c.arch, c.shards), func(t *testing.T) {
			cfg := synth.Config(c.arch, true)
			dir := filepath.Join(t.TempDir(), "hf")
			if err := synth.WriteHF(dir, cfg, 3, c.shards); err != nil {
				t.Fatal(err)
			}
			if c.shards > 1 {
				if _, err := os.Stat(filepath.Join(dir, "model.safetensors.index.json")); err != nil {
					t.Fatalf("no shard index: %v", err)
				}
			}
			out := runOK(t, "inspect", "--json", dir)
			var info inspectInfo
			if err := json.Unmarshal([]byte(out), &info); err != nil {
				t.Fatalf("inspect --json: %v\n%s", err, out)
			}
			got := info.Config
			want := cfg
			want.ContextLength = got.ContextLength // synth writes max_position_embeddings from its own default
			if !reflect.DeepEqual(got.LayerKinds, want.LayerKinds) || got.Arch != want.Arch || got.Hidden != want.Hidden ||
				got.Layers != want.Layers || got.FFN != want.FFN || got.Heads != want.Heads || got.KVHeads != want.KVHeads ||
				got.HeadDim != want.HeadDim || got.VocabSize != want.VocabSize || got.RopeDim != want.RopeDim ||
				got.SSMKeyHeads != want.SSMKeyHeads || got.SSMValueHeads != want.SSMValueHeads || got.TiedEmbeddings != want.TiedEmbeddings {
				t.Errorf("config:\n got %+v\nwant %+v", got, want)
			}
			specs := model.ExpectedTensors(cfg)
			var wantNames []string
			for _, s := range specs {
				if !s.Optional {
					wantNames = append(wantNames, fmt.Sprintf("%s %v F32", s.Name, s.Dims))
				}
			}
			var gotNames []string
			var bytes int64
			for _, tt := range info.Tensors {
				gotNames = append(gotNames, fmt.Sprintf("%s %v %s", tt.Name, tt.Dims, tt.Type))
				bytes += tt.Bytes
			}
			if !reflect.DeepEqual(gotNames, wantNames) {
				t.Errorf("tensors:\n got %s\nwant %s", strings.Join(gotNames, "\n     "), strings.Join(wantNames, "\n     "))
			}
			if bytes != info.Bytes || info.Weights*4 != info.Bytes {
				t.Errorf("totals: %d bytes listed, %d reported, %d weights", bytes, info.Bytes, info.Weights)
			}
			for _, r := range info.Recipes {
				if r.Error != "" {
					t.Errorf("recipe %s: %s", r.Recipe, r.Error)
				}
			}
		})
	}
}

// zeros writes n zero bytes.
type zeros int64

func (z zeros) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, 1<<20)
	var done int64
	for done < int64(z) {
		n, err := w.Write(buf[:min(int64(len(buf)), int64(z)-done)])
		done += int64(n)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// BenchmarkInspect2GiB inspects a 2 GiB single-file BF16 llama checkpoint
// (hidden 4096, FFN 11008, 4 layers, vocab 32000) in a child process and
// reports the wall time of the whole command and its peak RSS. Targets:
// under a second and under 100 MiB.
func BenchmarkInspect2GiB(b *testing.B) {
	dir := b.TempDir()
	cfg := map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 4,
		"num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
		"max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
	}
	cj, _ := json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644)
	w := &safetensors.Writer{}
	add := func(name string, shape ...int64) {
		n := int64(2)
		for _, d := range shape {
			n *= d
		}
		w.Tensors = append(w.Tensors, safetensors.WriterTensor{Name: name, Dtype: "BF16", Shape: shape, Data: zeros(n)})
	}
	add("model.embed_tokens.weight", 32000, 4096)
	add("lm_head.weight", 32000, 4096)
	add("model.norm.weight", 4096)
	for l := 0; l < 4; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", 4096)
		add(p+"post_attention_layernorm.weight", 4096)
		for _, m := range []string{"q_proj", "k_proj", "v_proj", "o_proj"} {
			add(p+"self_attn."+m+".weight", 4096, 4096)
		}
		add(p+"mlp.gate_proj.weight", 11008, 4096)
		add(p+"mlp.up_proj.weight", 11008, 4096)
		add(p+"mlp.down_proj.weight", 4096, 11008)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), w); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(dir, "model.safetensors"))
	b.Logf("checkpoint: %.2f GiB", float64(fi.Size())/(1<<30))
	args, _ := json.Marshal([]string{"inspect", "--json", dir})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperQnnprep$")
		cmd.Env = append(os.Environ(), "QNNPREP_HELPER_ARGS="+string(args))
		start := time.Now()
		out, err := cmd.Output()
		wall := time.Since(start)
		if err != nil || !strings.Contains(string(out), `"weights"`) {
			b.Fatalf("inspect: %v\n%s", err, out)
		}
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(float64(peers.MaxRSS(cmd.ProcessState))/(1<<20), "peak-RSS-MiB")
	}
}
