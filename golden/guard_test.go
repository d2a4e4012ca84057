package golden

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/sparse"
	"github.com/qnnprep/qnnprep/testkit/quantized"
)

// TestAccept: the one golden-guard rule. A golden is accepted for its own
// source and anything qnnprep derived from it (qmodels, a sparse variant,
// its qmodel, a pruned model, a qmodel of a qmodel), for a GGUF made
// elsewhere only with the golden's fingerprint given as an override, and
// refused for anything else with both fingerprints named.
func TestAccept(t *testing.T) {
	cfg := tinyConfig(model.Llama, 64)
	a := randomModel(t, cfg, 1)
	f := record(t, a, prompts(1, 128, 1), 4, 0)
	want := f.Model.SHA256
	q8 := quantized.Model(t, a, "q8_0")
	pat, err := sparse.ParsePattern("neuron")
	if err != nil {
		t.Fatal(err)
	}
	v, err := sparse.Apply(a, sparse.Options{Pattern: pat, Sparsity: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	pruned, err := v.Prune()
	if err != nil {
		t.Fatal(err)
	}
	// llama.cpp's Q8_0 of a: the same bytes qnnprep's q8_0 writes, without
	// qnnprep's keys.
	elsewhere := stripQnnprep(t, q8)
	other := randomModel(t, cfg, 2)

	for _, c := range []struct {
		name     string
		m        *model.Model
		override string
		rule     string // "" : refused
		steps    []string
	}{
		{"source", a, "", RuleSameModel, nil},
		{"qmodel", q8, "", RuleDerived, []string{"quantize q8_0"}},
		{"qmodel of a qmodel", quantized.Model(t, q8, "int8"), "", RuleDerived, []string{"quantize q8_0", "quantize int8"}},
		{"sparse variant", v.Model, "", RuleDerived, []string{"sparsify neuron, magnitude selection, target 0.25"}},
		{"sparse variant's qmodel", quantized.Model(t, v.Model, "int8"), "", RuleDerived,
			[]string{"sparsify neuron, magnitude selection, target 0.25", "quantize int8"}},
		{"pruned qmodel", quantized.Model(t, pruned, "q8_0"), "", RuleDerived,
			[]string{"sparsify neuron, magnitude selection, target 0.25, pruned", "quantize q8_0"}},
		{"made elsewhere", elsewhere, "", "", nil},
		{"made elsewhere, override", elsewhere, want, RuleOverride, nil},
		{"made elsewhere, override prefix", elsewhere, strings.ToUpper(want[:16]), RuleOverride, nil},
		{"unrelated", other, "", "", nil},
		{"unrelated, wrong override", other, strings.Repeat("0", 64), "", nil},
		{"unrelated, short override", other, want[:8], "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			acc, err := f.Accept(c.m, c.override)
			if c.rule == "" {
				if !errors.Is(err, ErrModelMismatch) || !strings.Contains(err.Error(), want) {
					t.Fatalf("want a refusal naming %s, got %v (%+v)", want, err, acc)
				}
				if c.override == "" {
					own, _ := f.Accept(c.m, want) // the artifact's fingerprint, as the override path reports it
					if !strings.Contains(err.Error(), own.Artifact) || !strings.Contains(err.Error(), "--source-fingerprint") {
						t.Fatalf("refusal does not name the artifact's fingerprint %s or the override: %v", own.Artifact, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if acc.Rule != c.rule || strings.Join(acc.Steps, "|") != strings.Join(c.steps, "|") || acc.Golden != want {
				t.Fatalf("accepted as %+v, want rule %q steps %q", acc, c.rule, c.steps)
			}
			if c.rule == RuleOverride && acc.Override != want {
				t.Fatalf("override not recorded: %+v", acc)
			}
		})
	}
}

func stripQnnprep(t *testing.T, m *model.Model) *model.Model {
	t.Helper()
	var md gguf.Metadata
	for _, kv := range m.Metadata {
		if !strings.HasPrefix(kv.Key, "qnnprep.") {
			md = append(md, kv)
		}
	}
	w := &gguf.Writer{Metadata: md}
	for _, tt := range m.Tensors {
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: tt.Name, Dims: tt.Dims, Type: tt.Type, Data: tt})
	}
	path := filepath.Join(t.TempDir(), "elsewhere.gguf")
	if err := gguf.WriteFile(path, w); err != nil {
		t.Fatal(err)
	}
	c, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
