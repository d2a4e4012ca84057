package quantize

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

const stories = "../../shared/fixtures/stories260K/hf"

func openStories(t *testing.T) *model.Model {
	t.Helper()
	m, err := model.Open(stories)
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
	ds, err := Recipes["q1"].Decide(shapes, []Rule{a, b}, false)
	if err == nil {
		t.Fatal("second override matches nothing and should be reported")
	}
	ds, err = Recipes["q1"].Decide(shapes, []Rule{b}, false)
	if err != nil || ds[0].Kind.String() != "INT8" {
		t.Fatalf("got %v, %v", ds, err)
	}
}
