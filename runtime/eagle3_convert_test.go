package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

// eagle3Config is the config.json of head cfg in SpecForge form.
func eagle3Config(cfg Eagle3Config) string {
	return fmt.Sprintf(`{"architectures":["LlamaForCausalLMEagle3"],"hidden_size":%d,"intermediate_size":%d,"num_attention_heads":%d,
"num_key_value_heads":%d,"head_dim":%d,"rms_norm_eps":%g,"rope_theta":%g,"num_hidden_layers":1,"max_position_embeddings":2048,
"draft_vocab_size":%d,"target_hidden_size":%d,"norm_before_residual":%v,"eagle_config":{"eagle_aux_hidden_state_layer_ids":[%d,%d,%d]}}`,
		cfg.Hidden, cfg.FFN, cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.RMSEps, cfg.RopeTheta, cfg.DraftVocab, cfg.TargetHidden,
		cfg.NormBeforeResidual, cfg.ExtractLayers[0], cfg.ExtractLayers[1], cfg.ExtractLayers[2])
}

// TestConvertEagle3: a head in Hugging Face form and its conversion to
// llama.cpp's EAGLE-3 GGUF layout propose the same tokens in every window
// and so reach the same acceptance, for a random head with a draft
// vocabulary (d2t, t2d) and a distilled one that is mostly accepted; the
// GGUF carries llama.cpp's keys and names.
func TestConvertEagle3(t *testing.T) {
	cfg, target := specTarget(t, model.Llama, 160)
	tm := synthBigram(t, cfg, 50)
	bigram := newEngine(t, tm, Options{})
	for _, tc := range []struct {
		name   string
		target *Engine
		parts  func() (Eagle3Config, []*model.Tensor)
		minAcc float64
	}{
		{"random", target, func() (Eagle3Config, []*model.Tensor) { return randomEagle3(t, target, 12) }, 0},
		{"distilled", bigram, func() (Eagle3Config, []*model.Tensor) { return distilledEagle3Parts(t, bigram, tm) }, 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ecfg, ts := tc.parts()
			dir := t.TempDir()
			writeEagle3HF(t, dir, ecfg, ts, eagle3Config(ecfg), cfg.VocabSize)
			out := filepath.Join(t.TempDir(), "head.gguf")
			tok := gguf.Metadata{{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "general.name", Value: "target"}}
			if _, err := ConvertEagle3HF(dir, out, Eagle3Target{Layers: cfg.Layers, Hidden: cfg.Hidden, Vocab: cfg.VocabSize, Metadata: tok}); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			md := f.Metadata
			arch, _ := md.String("general.architecture")
			layers, _ := md.Int32s(KeyEagle3TargetLayers)
			th, _ := md.Int(KeyEagle3TargetHidden)
			ctxLen, _ := md.Int("eagle3.context_length")
			tokModel, _ := md.String("tokenizer.ggml.model")
			if _, named := md.Get("general.name"); arch != "eagle3" || fmt.Sprint(layers) != fmt.Sprint(ecfg.ExtractLayers[:]) || th != int64(cfg.Hidden) || ctxLen != 2048 || tokModel != "gpt2" || named {
				t.Errorf("metadata: arch %q, layers %v, target hidden %d, context %d, tokenizer %q", arch, layers, th, ctxLen, tokModel)
			}
			for _, name := range []string{"fc.weight", "blk.0.attn_norm_2.weight", "blk.0.attn_q.weight", "output.weight"} {
				if _, ok := f.Tensor(name); !ok {
					t.Errorf("no tensor %s", name)
				}
			}
			if _, ok := f.Tensor("t2d"); ok {
				t.Error("t2d written (llama.cpp does not use it)")
			}
			f.Close()

			hf := must(LoadEagle3HF(tc.target, dir))
			defer hf.Close()
			gg := must(LoadEagle3(tc.target, out))
			defer gg.Close()
			if hf.Config().RopeNeox == gg.Config().RopeNeox {
				t.Error("both forms rotate the same way: the GGUF's q/k rows should be permuted for NORM rope")
			}
			var accepted [2]int
			for i, p := range specPrompts(cfg.VocabSize)[:4] {
				want, err := tc.target.Greedy(context.Background(), p, 48)
				if err != nil {
					t.Fatal(err)
				}
				a, b := &recorder{Drafter: hf.Drafter()}, &recorder{Drafter: gg.Drafter()}
				ga, sa, err := tc.target.Speculate(context.Background(), a, p, 48, 3)
				if err != nil {
					t.Fatal(err)
				}
				gb, sb, err := tc.target.Speculate(context.Background(), b, p, 48, 3)
				if err != nil {
					t.Fatal(err)
				}
				if err := sameTokens(ga, want); err != nil {
					t.Fatal(err)
				}
				if err := sameTokens(gb, want); err != nil {
					t.Fatal(err)
				}
				if sa.Accepted != sb.Accepted || sa.Windows != sb.Windows || len(a.props) != len(b.props) {
					t.Fatalf("prompt %d: HF %+v, GGUF %+v", i, sa, sb)
				}
				for j := range a.props {
					if err := sameTokens(b.props[j], a.props[j]); err != nil {
						t.Fatalf("prompt %d window %d: %v", i, j, err)
					}
				}
				accepted[0] += sa.Accepted
				accepted[1] += sa.Proposed
			}
			if rate := float64(accepted[0]) / float64(accepted[1]); rate < tc.minAcc {
				t.Errorf("acceptance rate %.2f, want ≥ %.2f", rate, tc.minAcc)
			}
		})
	}
}

// TestConvertEagle3Errors: what the conversion refuses, naming the file,
// tensor or key.
func TestConvertEagle3Errors(t *testing.T) {
	cfg, target := specTarget(t, model.Llama, 160)
	ecfg, ts := randomEagle3(t, target, 12)
	good := eagle3Config(ecfg)
	tgt := Eagle3Target{Layers: cfg.Layers, Hidden: cfg.Hidden, Vocab: cfg.VocabSize}
	for _, tc := range []struct {
		name  string
		conf  string
		vocab int
		tgt   Eagle3Target
		want  string
	}{
		{"no layers", strings.Replace(good, `,"eagle_config":{"eagle_aux_hidden_state_layer_ids":[0,1,2]}`, "", 1), cfg.VocabSize, Eagle3Target{Hidden: cfg.Hidden}, "names no eagle_aux_hidden_state_layer_ids: give the target model"},
		{"hidden", good, cfg.VocabSize, Eagle3Target{Layers: cfg.Layers, Hidden: 2 * cfg.Hidden}, fmt.Sprintf("target_hidden_size %d, the target model's hidden size is %d", cfg.Hidden, 2*cfg.Hidden)},
		{"layer", good, cfg.VocabSize, Eagle3Target{Layers: 1}, "feature layer 2 outside the target's [0, 1]"},
		{"d2t range", good, cfg.VocabSize, Eagle3Target{Layers: cfg.Layers, Vocab: 40}, "outside the target vocabulary [0, 40)"},
		{"t2d", good, cfg.VocabSize + 1, tgt, fmt.Sprintf(`tensor "t2d": dtype BOOL shape [%d], want BOOL [target vocabulary %d]`, cfg.VocabSize+1, cfg.VocabSize)},
		{"norm_before_fc", strings.Replace(good, `"num_hidden_layers":1`, `"num_hidden_layers":1,"norm_before_fc":true`, 1), cfg.VocabSize, tgt, "norm_before_fc"},
		{"shape", strings.Replace(good, `"intermediate_size":256`, `"intermediate_size":128`, 1), cfg.VocabSize, tgt, fmt.Sprintf(`tensor "midlayer.mlp.down_proj.weight" has shape [%d 256], want [%[1]d 128]`, cfg.Hidden)},
	} {
		dir := t.TempDir()
		writeEagle3HF(t, dir, ecfg, ts, tc.conf, tc.vocab)
		_, err := ConvertEagle3HF(dir, filepath.Join(t.TempDir(), "x.gguf"), tc.tgt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// A missing tensor is named in both forms.
	dir := t.TempDir()
	var fewer []*model.Tensor
	for _, tt := range ts {
		if tt.Name != e3HidNorm {
			fewer = append(fewer, tt)
		}
	}
	writeEagle3HF(t, dir, ecfg, fewer, good, cfg.VocabSize)
	if _, err := ConvertEagle3HF(dir, filepath.Join(t.TempDir(), "x.gguf"), tgt); err == nil || !strings.Contains(err.Error(), "missing tensor midlayer.hidden_norm.weight (GGUF blk.0.attn_norm_2.weight)") {
		t.Errorf("missing tensor: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
}
