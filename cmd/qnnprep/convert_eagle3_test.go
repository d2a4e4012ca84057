package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/bench"
	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/safetensors"
)

// writeHFEagle3 writes a random EAGLE-3 head for stories260K (hidden 64,
// 5 layers, vocabulary 512) in Hugging Face form (SpecForge names, d2t
// offsets to ids 5i, t2d), with no feature layers in its config.
func writeHFEagle3(t *testing.T, dir string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(4, 5))
	w := &safetensors.Writer{}
	add := func(name string, shape ...int64) {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		b := make([]byte, 0, 4*n)
		for range n {
			v := float32(1)
			if len(shape) == 2 {
				v = float32(rng.NormFloat64() / math.Sqrt(float64(shape[1])))
			}
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		w.Tensors = append(w.Tensors, safetensors.WriterTensor{Name: name, Dtype: safetensors.F32, Shape: shape, Data: safetensors.Bytes(b)})
	}
	add("fc.weight", 64, 192)
	add("midlayer.input_layernorm.weight", 64)
	add("midlayer.hidden_norm.weight", 64)
	add("midlayer.self_attn.q_proj.weight", 64, 128)
	add("midlayer.self_attn.k_proj.weight", 32, 128)
	add("midlayer.self_attn.v_proj.weight", 32, 128)
	add("midlayer.self_attn.o_proj.weight", 64, 64)
	add("midlayer.post_attention_layernorm.weight", 64)
	add("midlayer.mlp.gate_proj.weight", 128, 64)
	add("midlayer.mlp.up_proj.weight", 128, 64)
	add("midlayer.mlp.down_proj.weight", 64, 128)
	add("norm.weight", 64)
	add("lm_head.weight", 100, 64)
	d2t := make([]byte, 0, 800)
	t2d := make([]byte, 512)
	for i := range 100 {
		d2t = binary.LittleEndian.AppendUint64(d2t, uint64(4*i))
		t2d[5*i] = 1
	}
	w.Tensors = append(w.Tensors,
		safetensors.WriterTensor{Name: "d2t", Dtype: safetensors.I64, Shape: []int64{100}, Data: safetensors.Bytes(d2t)},
		safetensors.WriterTensor{Name: "t2d", Dtype: safetensors.BOOL, Shape: []int64{512}, Data: safetensors.Bytes(t2d)})
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), w); err != nil {
		t.Fatal(err)
	}
	conf := `{"architectures":["LlamaForCausalLMEagle3"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
"num_key_value_heads":2,"head_dim":16,"rms_norm_eps":1e-5,"rope_theta":10000,"num_hidden_layers":1,"max_position_embeddings":512,
"draft_vocab_size":100,"vocab_size":512}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConvertEagle3: convert writes an EAGLE-3 head as released (HF form)
// in llama.cpp's eagle3 layout, taking the feature layers, target hidden
// size and tokenizer from --target (without it a config that names no
// feature layers is refused); speculate then gives the same tokens and
// acceptance with the HF head and the converted file.
func TestConvertEagle3(t *testing.T) {
	needStories(t)
	head := t.TempDir()
	writeHFEagle3(t, head)
	out := filepath.Join(t.TempDir(), "head.gguf")
	var code int
	errOut := captureStderr(t, func() { code = run([]string{"convert", head, out}) })
	if code == 0 || !strings.Contains(errOut, "give the target model") {
		t.Fatalf("without --target: exit %d: %s", code, errOut)
	}
	stdout := captureStdout(t, func() { code = run([]string{"convert", head, out, "--target", storiesGGUF}) })
	if code != 0 || !strings.Contains(stdout, "EAGLE-3 head (eagle3)") || !strings.Contains(stdout, "target layers [2 2 2]") {
		t.Fatalf("exit %d: %s", code, stdout)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	arch, _ := f.Metadata.String("general.architecture")
	layers, _ := f.Metadata.Int32s(runtime.KeyEagle3TargetLayers)
	_, tok := f.Metadata.Get("tokenizer.ggml.tokens")
	f.Close()
	if arch != "eagle3" || len(layers) != 3 || !tok {
		t.Errorf("converted head: arch %q, target layers %v, tokenizer copied %v", arch, layers, tok)
	}
	if code := run([]string{"convert", storiesGGUF, filepath.Join(t.TempDir(), "x.gguf"), "--target", storiesGGUF}); code != 2 {
		t.Errorf("--target on a model that is not an EAGLE-3 head: exit %d", code)
	}

	var res [2]runtime.Comparison
	for i, h := range []string{head, out} {
		o := captureStdout(t, func() {
			code = run([]string{"speculate", storiesGGUF, "--eagle3", h, "-k", "3", "--prompt", "Once upon a time", "-n", "32", "--json"})
		})
		if err := json.Unmarshal([]byte(o), &res[i]); err != nil || code != 0 {
			t.Fatalf("speculate --eagle3 %s: exit %d, %v: %s", h, code, err, o)
		}
	}
	a, b := res[0], res[1]
	if !a.EqualsGreedy || !b.EqualsGreedy || a.Stats.Accepted != b.Stats.Accepted || a.Stats.Windows != b.Stats.Windows || a.Stats.Windows == 0 {
		t.Errorf("HF head %+v\nconverted %+v", a.Stats, b.Stats)
	}

	// bench --draft measures the converted head's speculative decode.
	var doc struct{ Reports []bench.Report }
	o := captureStdout(t, func() {
		code = run([]string{"bench", storiesGGUF, "--draft", out, "-p", "4", "-n", "12", "-r", "1", "-t", "1", "-k", "2", "-o", "json"})
	})
	if err := json.Unmarshal([]byte(o), &doc); err != nil || code != 0 || len(doc.Reports) != 1 {
		t.Fatalf("bench --draft: exit %d, %v: %s", code, err, o)
	}
	rep := doc.Reports[0]
	if rep.Draft == nil || rep.Draft.Arch != "eagle3" || len(rep.Speculative) != 1 || !rep.Speculative[0].Sane || rep.Speculative[0].K != 2 {
		t.Errorf("bench --draft %s: draft %+v, speculative %+v", out, rep.Draft, rep.Speculative)
	}
}

// TestBenchSpecText: bench's speculative runs continue text tokenized with
// the model's tokenizer, a story opening by default and --spec-text when
// given, and the report says which; the draft (the model itself) is
// accepted on it and every row is sane.
func TestBenchSpecText(t *testing.T) {
	needStories(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "text: " + bench.DefaultSpecText},
		{[]string{"--spec-text", "The little dog ran to the park"}, "text: The little dog ran to the park"},
	} {
		var code int
		o := captureStdout(t, func() {
			code = run(append([]string{"bench", storiesGGUF, "--draft", storiesGGUF, "-p", "4", "-n", "12", "-r", "1", "-t", "1", "-k", "2", "-o", "json", "-q"}, tc.args...))
		})
		var doc struct{ Reports []bench.Report }
		if err := json.Unmarshal([]byte(o), &doc); err != nil || code != 0 || len(doc.Reports) != 1 {
			t.Fatalf("%v: exit %d, %v: %s", tc.args, code, err, o)
		}
		rep := doc.Reports[0]
		if rep.Settings.SpecPrompt != tc.want || len(rep.Speculative) != 1 || !rep.Speculative[0].Sane || rep.Speculative[0].AcceptanceLength != 2 {
			t.Errorf("%v: spec prompt %q, speculative %+v", tc.args, rep.Settings.SpecPrompt, rep.Speculative)
		}
	}
}

// TestBuildEagletConverted: build accepts an EAGLE-3 head converted from
// its released Hugging Face form: --dialog eaglet --eagle3 HEAD builds
// (dry run) a bundle with the eaglet Genie config and the draft engine,
// and verify's eaglet decode through the plan equals the whole model's.
func TestBuildEagletConverted(t *testing.T) {
	needStories(t)
	head := t.TempDir()
	writeHFEagle3(t, head)
	conv := filepath.Join(t.TempDir(), "head.gguf")
	if code := run([]string{"convert", head, conv, "--target", storiesGGUF, "-q"}); code != 0 {
		t.Fatalf("convert: exit %d", code)
	}
	out := filepath.Join(t.TempDir(), "out")
	var code int
	stdout := captureStdout(t, func() {
		code = run([]string{"build", storiesGGUF, out, "--recipe", "q8_0", "--stages", "2", "--ar", "16,1", "--cl", "128", "--calibrate", "0",
			"--dialog", "eaglet", "--draft-len", "3", "--n-branches", "2", "--max-tokens-target-can-evaluate", "8", "--eagle3", conv, "--dry-run", "-q", "--json"})
	})
	var sum struct {
		Verify struct {
			SpeculativeEqualsWhole *bool `json:"speculative_equals_whole"`
		} `json:"verify"`
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || code != 0 {
		t.Fatalf("build: exit %d, %v: %s", code, err, stdout)
	}
	if s := sum.Verify.SpeculativeEqualsWhole; s == nil || !*s {
		t.Errorf("eaglet verify: %s", stdout)
	}
	genie, err := os.ReadFile(filepath.Join(out, "bundle", "genie_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type": "eaglet"`, `"draft-n-vocab": 100`, `"draft-token-map"`, `"lut-path"`} {
		if !strings.Contains(string(genie), want) {
			t.Errorf("genie_config.json lacks %s", want)
		}
	}
}
