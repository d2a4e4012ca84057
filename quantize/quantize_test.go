package quantize

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/testkit"
)

func openStories(t *testing.T) *model.Model {
	t.Helper()
	m, err := model.Open(testkit.Stories(t, "hf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestRunIsDeterministicAndFallsBack(t *testing.T) {
	m := openStories(t)
	dir := t.TempDir()
	var outs [2][]byte
	var rep *Report
	for i := range outs {
		out := filepath.Join(dir, "q1-"+string(rune('a'+i))+".gguf")
		var err error
		rep, err = Run(context.Background(), m, out, Options{Recipe: Recipes["q1"], Workers: 1 + i})
		if err != nil {
			t.Fatal(err)
		}
		outs[i], _ = os.ReadFile(out)
	}
	if string(outs[0]) != string(outs[1]) {
		t.Fatal("same input and recipe with 1 and 2 workers gave different bytes")
	}
	// stories260K's rows (64, 172) never fit Q1_0's 128: every matrix falls
	// back, ffn_down (172, not a multiple of 32) all the way to F16.
	types := map[string]string{}
	for _, tr := range rep.Tensors {
		types[tr.Name] = tr.Type
	}
	for name, want := range map[string]string{
		"blk.0.attn_q.weight":    "Q8_0",
		"blk.0.ffn_down.weight":  "F16",
		"blk.0.attn_norm.weight": "F32",
		"token_embd.weight":      "Q2_0", // tied: it is also the head (64 fits Q2_0's block)
	} {
		if types[name] != want {
			t.Errorf("%s stored as %s, want %s", name, types[name], want)
		}
	}
	if len(rep.Fallbacks) != 5*7 {
		t.Errorf("%d fallbacks reported, want 35 (7 matrices × 5 layers): %v", len(rep.Fallbacks), rep.Fallbacks)
	}
	f, err := gguf.Open(filepath.Join(dir, "q1-a.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if s, _ := f.Metadata.String(KeyRecipe); s != "q1" {
		t.Errorf("recipe key = %q", s)
	}
	fp, err := Fingerprint(m)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := f.Metadata.String(KeySourceSHA256); s != fp || len(s) != 64 {
		t.Errorf("source hash %q, want the fingerprint %q", s, fp)
	}
}

func TestRunReportsErrorMetrics(t *testing.T) {
	m := openStories(t)
	rep, err := Run(context.Background(), m, filepath.Join(t.TempDir(), "q8.gguf"), Options{Recipe: Recipes["q8_0"]})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range rep.Tensors {
		switch tr.Type {
		case "F32":
			if tr.RelRMSE != 0 || tr.Cosine != 1 {
				t.Errorf("%s kept F32 but reports rel-RMSE %g, cosine %g", tr.Name, tr.RelRMSE, tr.Cosine)
			}
		case "Q8_0":
			// ggml's Q8_0 on these weights: rel-RMSE about 0.005.
			if tr.RelRMSE <= 0 || tr.RelRMSE > 0.01 || tr.Cosine < 0.9999 {
				t.Errorf("%s Q8_0: rel-RMSE %g, cosine %g", tr.Name, tr.RelRMSE, tr.Cosine)
			}
		}
	}
}

func TestBadRecipeInputFailsBeforeWriting(t *testing.T) {
	m := openStories(t)
	cases := []struct {
		name     string
		override string
		want     string
	}{
		{"unknown type", "blk.*.attn_q.weight=Q9_9", "unknown ggml type"},
		{"type qnnprep cannot write", "blk.*.attn_q.weight=Q4_K", "cannot be produced"},
		{"pattern matching nothing", "blk.99.*=Q8_0", "matches no tensor"},
		{"row that does not fit the type", "blk.0.ffn_down.weight=Q8_0", "rows of 172"},
		{"malformed", "Q8_0", "want PATTERN=TYPE"},
		{"norm to a type llama.cpp cannot load", "blk.0.attn_norm.weight=Q1_0", "tensor blk.0.attn_norm.weight must stay F32"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out.gguf")
			rule, err := ParseOverride(c.override)
			if err == nil {
				_, err = Run(context.Background(), m, out, Options{Recipe: Recipes["q8_0"], Overrides: []Rule{rule}})
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("files left behind: %v", ents)
			}
		})
	}
	if _, err := LookupRecipe("q3"); err == nil || !strings.Contains(err.Error(), "known: ") {
		t.Errorf("unknown recipe: %v", err)
	}
}

func TestRecipeWithoutFallbackIsAnError(t *testing.T) {
	r := &Recipe{Name: "strict", Matrix: Kind{Type: gguf.Q1_0}}
	_, err := r.Decide([]TensorShape{{Name: "blk.0.ffn_down.weight", Dims: []int64{172, 64}, Type: gguf.F32}}, nil, false)
	if err == nil || !strings.Contains(err.Error(), "no fallback") {
		t.Fatalf("error %v", err)
	}
}

func TestOverrideOrderFirstMatchWins(t *testing.T) {
	shapes := []TensorShape{{Name: "blk.0.ffn_up.weight", Dims: []int64{256, 512}, Type: gguf.F32}}
	a, _ := ParseOverride("blk.0.*=F16")
	b, _ := ParseOverride("blk.*.ffn_up.weight=int8")
	_, err := Recipes["q1"].Decide(shapes, []Rule{a, b}, false)
	if err == nil {
		t.Fatal("second override matches nothing and should be reported")
	}
	ds, err := Recipes["q1"].Decide(shapes, []Rule{b}, false)
	if err != nil || ds[0].Kind.String() != "INT8" {
		t.Fatalf("got %v, %v", ds, err)
	}
}

// Overrides are checked against what llama.cpp can load: norms, 1-D
// tensors and ssm_conv1d stay F32.
func TestOverrideKeepsF32Tensors(t *testing.T) {
	shapes := []TensorShape{
		{Name: "blk.0.attn_norm.weight", Dims: []int64{256}, Type: gguf.F32},
		{Name: "blk.0.attn_q_norm.weight", Dims: []int64{128}, Type: gguf.F32},
		{Name: "blk.0.attn_q.bias", Dims: []int64{256}, Type: gguf.F32},
		{Name: "blk.0.attn_q.weight", Dims: []int64{256, 256}, Type: gguf.F32},
		{Name: "blk.0.ssm_conv1d.weight", Dims: []int64{4, 1024}, Type: gguf.F32},
		{Name: "blk.0.ssm_a", Dims: []int64{32, 1}, Type: gguf.F32},
	}
	cases := []struct {
		override string
		want     string // error substring; "" for success
		kinds    []string
	}{
		{"blk.0.attn_norm.weight=Q1_0", "override blk.0.attn_norm.weight=Q1_0: tensor blk.0.attn_norm.weight must stay F32: llama.cpp reads norm weights only as F32", nil},
		{"blk.0.attn_norm.weight=F16", "tensor blk.0.attn_norm.weight must stay F32", nil},
		{"blk.0.attn_q.bias=Q8_0", "tensor blk.0.attn_q.bias must stay F32: llama.cpp keeps 1-D tensors", nil},
		{"blk.0.ssm_conv1d.weight=F16", "tensor blk.0.ssm_conv1d.weight must stay F32: llama.cpp's ssm_conv", nil},
		{"blk.0.ssm_a=BF16", "tensor blk.0.ssm_a must stay F32: llama.cpp keeps 1-D tensors", nil},
		{"*_norm.weight=Q8_0", "override *_norm.weight=Q8_0 matches only tensors that must stay F32: blk.0.attn_norm.weight (llama.cpp reads norm weights only as F32); blk.0.attn_q_norm.weight", nil},
		{"blk.0.attn_norm.weight=F32", "", []string{"F32", "F32", "F32", "Q8_0", "F32", "F32"}},
		// A glob changes the tensors that can take the type and leaves the rest F32.
		{"blk.0.*=F16", "", []string{"F32", "F32", "F32", "F16", "F32", "F32"}},
	}
	for _, c := range cases {
		t.Run(c.override, func(t *testing.T) {
			rule, err := ParseOverride(c.override)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := Recipes["q8_0"].Decide(shapes, []Rule{rule}, false)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range ds {
				if d.Kind.String() != c.kinds[i] {
					t.Errorf("%s: %s, want %s", d.Name, d.Kind, c.kinds[i])
				}
			}
		})
	}
}
