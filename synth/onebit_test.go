package synth

import (
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/testkit/quantized"
)

// TestOneBitLossless: the q1 recipe stores a 1-bit-native model without
// loss — every tensor of the qmodel dequantizes to exactly the source's
// values — and it really quantizes (Q1_0 matrices, a Q2_0 head), so the
// Q1_0 encoder's mean-|x| scale and the Q2_0 scale search both recover the
// exact fp16 scales. The ordinary synthetic model is not lossless.
func TestOneBitLossless(t *testing.T) {
	for _, arch := range []model.Arch{model.Llama, model.Qwen2, model.Qwen3, model.Qwen35} {
		t.Run(string(arch), func(t *testing.T) {
			cfg := Config(arch, true)
			src, err := OneBitModel(cfg, 7)
			if err != nil {
				t.Fatal(err)
			}
			q := quantized.Model(t, src, "q1")
			types := map[gguf.Type]int{}
			for i, qt := range q.Tensors {
				types[qt.Type]++
				want, err := src.Tensors[i].Float32()
				if err != nil {
					t.Fatal(err)
				}
				got, err := qt.Float32()
				if err != nil {
					t.Fatal(err)
				}
				for j := range want {
					if got[j] != want[j] {
						t.Fatalf("%s (%v) element %d: %g after q1, source %g", qt.Name, qt.Type, j, got[j], want[j])
					}
				}
			}
			if types[gguf.Q1_0] == 0 || types[gguf.Q2_0] == 0 {
				t.Fatalf("q1 qmodel types %v: want Q1_0 matrices and a Q2_0 head", types)
			}
			plain, err := Model(cfg, 7)
			if err != nil {
				t.Fatal(err)
			}
			pq := quantized.Model(t, plain, "q1")
			changed := map[gguf.Type]bool{}
			for i, qt := range pq.Tensors {
				w, _ := plain.Tensors[i].Float32()
				g, _ := qt.Float32()
				for j := range w {
					if w[j] != g[j] {
						changed[qt.Type] = true
						break
					}
				}
			}
			if !changed[gguf.Q1_0] || !changed[gguf.Q2_0] {
				t.Fatalf("q1 of the ordinary synthetic model changed only %v; the lossless check cannot tell", changed)
			}
		})
	}
}

// TestWriteGGUFOneBit: the released form of the 1-bit-native model holds
// its matrices in Q1_0 and decodes to exactly OneBitModel's values; q1
// copies every tensor of it, and the qmodel's lineage says so.
func TestWriteGGUFOneBit(t *testing.T) {
	cfg := Config(model.Qwen35, true)
	path := filepath.Join(t.TempDir(), "q1native.gguf")
	if err := WriteGGUFOneBit(path, cfg, 5); err != nil {
		t.Fatal(err)
	}
	m, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want, err := OneBitModel(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	q1 := 0
	for i, tt := range m.Tensors {
		if tt.Type == gguf.Q1_0 {
			q1++
		}
		a, _ := tt.Float32()
		b, _ := want.Tensors[i].Float32()
		for j := range a {
			if a[j] != b[j] {
				t.Fatalf("%s (%v) element %d: %g, OneBitModel %g", tt.Name, tt.Type, j, a[j], b[j])
			}
		}
	}
	if q1 == 0 {
		t.Fatal("no Q1_0 tensor in the released 1-bit model")
	}
	q := quantized.Model(t, m, "q1")
	steps, _ := q.Metadata.Strings(quantize.KeyLineageSteps)
	if len(steps) != 1 || steps[0] != "quantize q1"+quantize.StepCopied {
		t.Fatalf("lineage steps %q", steps)
	}
}
