package runtime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit"
)

// Synthetic llama and qwen3 models with linear, yarn and llama3 RoPE
// scaling, with tied and untied heads, decode exactly as llama.cpp
// decodes their GGUF: from that GGUF and from the same model as a Hugging
// Face directory, whole and through a two-stage plan. The prompt is long
// enough that the same weights without scaling decode other tokens, so
// ignoring the scaling cannot pass.
func TestRopeScalingMatchesLlamaCpp(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	ctx := context.Background()
	prompt := make([]int32, 48)
	prompt[0] = 1
	for i := 1; i < len(prompt); i++ {
		prompt[i] = int32(3 + (i*131)%500)
	}
	for _, arch := range []model.Arch{model.Llama, model.Qwen3} {
		for _, s := range synth.RopeScalings(arch) {
			for _, tied := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/tied=%v", arch, s.Type, tied), func(t *testing.T) {
					cfg := synth.RopeScaled(synth.Config(arch, false), s)
					cfg.TiedEmbeddings = tied
					path, e, ours := pickModelFor(t, cfg, gguf.F32, prompt)
					theirs, err := peers.LlamaGreedy(path, prompt, genTokens, 1)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(ours, theirs) {
						t.Errorf("greedy ids differ from llama.cpp:\n qnnprep   %v\n llama.cpp %v", ours, theirs)
					}
					var seed uint64
					fmt.Sscanf(filepath.Base(path), "seed%d.gguf", &seed)

					plain := cfg
					plain.RopeScaling, plain.RopeFreqFactors = model.RopeScaling{}, nil
					unscaled := filepath.Join(t.TempDir(), "unscaled.gguf")
					if err := synth.WriteGGUF(unscaled, plain, seed, gguf.F32); err != nil {
						t.Fatal(err)
					}
					if u, err := engine(t, unscaled).Greedy(ctx, prompt, genTokens); err != nil {
						t.Fatal(err)
					} else if slices.Equal(u, ours) {
						t.Errorf("without scaling the model decodes the same %v: the prompt does not test the scaling", u)
					}

					hf := filepath.Join(t.TempDir(), "hf")
					if err := synth.WriteHF(hf, cfg, seed, 1); err != nil {
						t.Fatal(err)
					}
					fromHF, err := engine(t, hf).Greedy(ctx, prompt, genTokens)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(fromHF, ours) {
						t.Errorf("HF directory decodes differently from the GGUF:\n HF   %v\n GGUF %v", fromHF, ours)
					}

					for _, pos := range []shard.Positional{shard.Rope, shard.Absolute} {
						m, err := model.Open(path)
						if err != nil {
							t.Fatal(err)
						}
						defer m.Close()
						p, err := shard.PlanModel(m, shard.Options{Stages: 2, AR: []int{16, 1}, CL: []int{128}, Positional: pos})
						if err != nil {
							t.Fatal(err)
						}
						st, err := runtime.NewStaged(e, p)
						if err != nil {
							t.Fatal(err)
						}
						staged, err := st.Greedy(ctx, prompt, genTokens)
						if err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(staged, ours) {
							t.Errorf("%s plan decodes differently from the whole model:\n staged %v\n whole  %v", pos, staged, ours)
						}
					}
				})
			}
		}
	}
}
