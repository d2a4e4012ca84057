package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
					code = run([]string{"build", src, out, "--recipe", "q8_0", "--stages", "2", "--ar", "16,1", "--cl", "128", "-n", "8", "-q"})
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
