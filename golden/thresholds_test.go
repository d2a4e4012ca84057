package golden

import (
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit/quantized"
)

// TestDefaultThresholds: with the default thresholds, correct qmodels of a
// 1-bit-native model pass (int8, q8_0, and q1, which stores it without
// loss) and broken artifacts fail: a qmodel with a matrix's rows or a
// norm reversed, an unrelated model let through by the override, and q1
// of a model not trained for 1-bit weights (a measured loss, not hidden).
func TestDefaultThresholds(t *testing.T) {
	cfg := synth.Config(model.Llama, true)
	native, err := synth.OneBitModel(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := synth.Model(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	unrelated, err := synth.OneBitModel(cfg, 101)
	if err != nil {
		t.Fatal(err)
	}
	ps := prompts(3, cfg.VocabSize, 1)
	f := record(t, native, ps, 16, 8)
	fPlain := record(t, plain, ps, 16, 8)
	i8 := quantized.Model(t, native, "int8")
	reversed := func(m *model.Model, name string) *model.Model {
		for _, tt := range m.Tensors {
			if tt.Name != name {
				continue
			}
			v, err := tt.Float32()
			if err != nil {
				t.Fatal(err)
			}
			n := int(tt.Dims[0])
			rows := len(v) / n
			out := make([]float32, len(v))
			for r := range rows {
				copy(out[r*n:(r+1)*n], v[(rows-1-r)*n:(rows-r)*n])
			}
			if rows == 1 {
				for j := range out {
					out[j] = v[n-1-j]
				}
			}
			return rewrite(t, m, name, out)
		}
		t.Fatalf("no tensor %s", name)
		return nil
	}
	for _, c := range []struct {
		name     string
		f        *File
		m        *model.Model
		override bool
		pass     bool
		basis    string
	}{
		{"source", f, native, false, true, "own source"},
		{"int8", f, i8, false, true, "recipe int8"},
		{"q8_0", f, quantized.Model(t, native, "q8_0"), false, true, "recipe q8_0"},
		{"q1 of a 1-bit-native model", f, quantized.Model(t, native, "q1"), false, true, "recipe q1"},
		{"int8, a matrix's rows reversed", f, reversed(i8, "blk.0.ffn_down.weight"), false, false, "recipe int8"},
		{"int8, attention output reversed", f, reversed(i8, "blk.1.attn_output.weight"), false, false, "recipe int8"},
		{"int8, output norm reversed", f, reversed(i8, "output_norm.weight"), false, false, "recipe int8"},
		{"unrelated model, overridden", f, unrelated, true, false, "F32 model made elsewhere"},
		{"q1 of a model not trained for it", fPlain, quantized.Model(t, plain, "q1"), false, false, "recipe q1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			override := ""
			if c.override {
				override = c.f.Model.SHA256
			}
			acc, err := c.f.Accept(c.m, override)
			if err != nil {
				t.Fatal(err)
			}
			crit := c.f.DefaultCriteria(c.m, acc)
			if !strings.Contains(crit.Basis, c.basis) || crit.MinTop1 == 0 || crit.MinCosine == 0 {
				t.Fatalf("criteria %s, want a basis naming %q", crit, c.basis)
			}
			r, err := Verify(ctx, EngineDecoder(engine(t, c.m)), c.f, crit)
			if err != nil {
				t.Fatal(err)
			}
			if r.Pass != c.pass {
				t.Fatalf("pass %v, want %v: top-1 %.3f, cosine %.5f, failures %v", r.Pass, c.pass, r.Summary.Top1, *r.Summary.Cosine, r.Failures)
			}
			if !c.pass && !strings.Contains(strings.Join(r.Failures, "\n"), "below min-") {
				t.Fatalf("failures do not name the threshold: %v", r.Failures)
			}
		})
	}
}

// TestOverrides: a threshold given replaces the default and the basis
// says so; the others stay.
func TestOverrides(t *testing.T) {
	zero, one := 0.0, 1.0
	off := false
	c := Criteria{MinMatch: 0.5, MinTop1: 0.8, MinCosine: 0.99, FailOnDegeneration: true, Basis: "default"}
	got := c.With(Overrides{MinTop1: &zero, MinCosine: &one, FailOnDegeneration: &off})
	want := Criteria{MinMatch: 0.5, MinTop1: 0, MinCosine: 1, Basis: "default; min-top1, min-cosine, fail-on-degeneration given"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if c.With(Overrides{}) != c {
		t.Fatalf("no overrides changed %+v", c)
	}
}
