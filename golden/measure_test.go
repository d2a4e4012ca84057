package golden

import (
	"fmt"
	"os"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit/quantized"
)

func mins(r *Report) (float64, float64, float64) {
	m, t1, c := 1.0, 1.0, 1.0
	for _, p := range r.Prompts {
		m, t1 = min(m, p.MatchFraction), min(t1, p.Top1)
		if p.Cosine != nil {
			c = min(c, *p.Cosine)
		}
	}
	return m, t1, c
}

func TestMeasureThresholds(t *testing.T) {
	if os.Getenv("QNNPREP_MEASURE") == "" {
		t.Skip()
	}
	for _, arch := range []model.Arch{model.Llama, model.Qwen2, model.Qwen3, model.Qwen35} {
		for _, q1 := range []bool{false, true} {
			for seed := uint64(1); seed <= 2; seed++ {
				cfg := synth.Config(arch, q1)
				var src *model.Model
				var err error
				if q1 {
					src, err = synth.OneBitModel(cfg, seed)
				} else {
					src, err = synth.Model(cfg, seed)
				}
				if err != nil {
					t.Fatal(err)
				}
				g, err := Record(ctx, engine(t, src), prompts(4, cfg.VocabSize, seed), 32, 8)
				if err != nil {
					t.Fatal(err)
				}
				recipes := []string{"int8", "q8_0", "f16", "bf16"}
				if q1 {
					recipes = append(recipes, "q1")
				}
				line := func(name string, m *model.Model) {
					r, err := Verify(ctx, EngineDecoder(engine(t, m)), g, Criteria{})
					if err != nil {
						t.Fatal(err)
					}
					a, b, c := mins(r)
					fmt.Printf("%-8s q1=%-5v seed=%d %-12s match %.3f top1 %.3f cos %.5f | mean top1 %.3f cos %.5f\n", arch, q1, seed, name, a, b, c, r.Summary.Top1, *r.Summary.Cosine)
				}
				var i8 *model.Model
				for _, rn := range recipes {
					q := quantized.Model(t, src, rn)
					if rn == "int8" {
						i8 = q
					}
					line(rn, q)
				}
				// broken: permuted rows of one FFN matrix, an unrelated model
				for _, name := range []string{"blk.0.ffn_down.weight", "blk.1.attn_output.weight", "output_norm.weight"} {
					var tt *model.Tensor
					for _, x := range i8.Tensors {
						if x.Name == name {
							tt = x
						}
					}
					if tt == nil {
						continue
					}
					v, _ := tt.Float32()
					n := int(tt.Dims[0])
					rows := len(v) / n
					p := make([]float32, len(v))
					for r := 0; r < rows; r++ {
						copy(p[r*n:(r+1)*n], v[(rows-1-r)*n:(rows-r)*n])
					}
					if rows == 1 {
						for j := range p {
							p[j] = v[n-1-j]
						}
					}
					line("perm "+name[:12], rewrite(t, i8, name, p))
				}
				var other *model.Model
				if q1 {
					other, _ = synth.OneBitModel(cfg, seed+100)
				} else {
					other, _ = synth.Model(cfg, seed+100)
				}
				line("unrelated", other)
			}
		}
	}
}
