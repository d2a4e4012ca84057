package onnx

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// TestForecastTable: with ssd-q1 forecast embeddings the first stage's
// Gather table is token_embd.weight followed by the forecast rows, as
// ForecastRows gives them; its encoding covers them (each row's codes
// re-quantize exactly and lie within half a step of the given value);
// without them the plan's extra rows are an error that says what to give.
func TestForecastTable(t *testing.T) {
	for _, recipe := range []string{"", "int8", "q8_0"} {
		t.Run(recipe, func(t *testing.T) {
			var m *model.Model
			if recipe == "" {
				m = tinyModel(t, synth.Config(model.Llama, true), 3)
			} else {
				m = qmodel(t, model.Llama, recipe)
			}
			c := m.Config
			const count = 3
			d := shard.Dialog{Type: shard.SSD, ForecastTokenCount: count, Branches: []int{1}, ForecastPrefix: 4, ForecastPrefixName: "fp"}
			p, err := shard.NewPlan(c, shard.Sizes{Layers: make([]int64, c.Layers)}, "tiny", shard.Options{Stages: 2, AR: []int{4}, CL: []int{16}, Dialog: d})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			rows := make([]float32, count*c.Hidden)
			for i := range rows {
				rows[i] = float32(rng.NormFloat64())
			}
			if _, err := Export(m, p, t.TempDir(), ExportOptions{External: true}, nil); err == nil || !strings.Contains(err.Error(), "give the 3 forecast-token embeddings (--forecast-embeddings)") {
				t.Fatalf("export without forecast rows: %v", err)
			}
			dir := t.TempDir()
			if _, err := Export(m, p, dir, ExportOptions{Options: Options{Forecast: rows}, External: true}, nil); err != nil {
				t.Fatal(err)
			}
			g := p.Graphs[0]
			base := filepath.Join(dir, g.Name)
			raw := externalData(t, base+".onnx")["token_embd.weight"]
			emb := m.Tensor("token_embd.weight")
			want, err := ForecastRows(emb, p.Container, rows)
			if err != nil {
				t.Fatal(err)
			}
			h, vocab := c.Hidden, c.VocabSize
			if len(raw) != 4*(vocab+count)*h {
				t.Fatalf("table of %d bytes, want %d rows of %d", len(raw), vocab+count, h)
			}
			encRaw, err := os.ReadFile(base + ".encodings.json")
			if err != nil {
				t.Fatal(err)
			}
			enc, err := DecodeEncodings(encRaw, g.Name)
			if err != nil {
				t.Fatal(err)
			}
			e := enc.Param("token_embd.weight")
			if (e == nil) != (recipe == "") {
				t.Fatalf("recipe %q: encoding %v", recipe, e)
			}
			if e != nil {
				checkTensorCodes(t, emb, e, raw[:4*vocab*h], false)
			}
			for i := range rows {
				got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(vocab*h+i):]))
				if got != want[i] {
					t.Fatalf("forecast value %d: table %v, ForecastRows %v", i, got, want[i])
				}
				if e == nil {
					if got != rows[i] {
						t.Fatalf("float table: forecast value %d = %v, given %v", i, got, rows[i])
					}
					continue
				}
				si := vocab + i/h
				if e.EncType == PerBlock {
					si = (vocab*h + i) / e.BlockSize
				}
				code := e.Code(got, si)
				step := float64(e.Scale[si])
				if float64(code)*step != float64(got) && float32(float64(code)*step) != got {
					t.Fatalf("forecast value %d: %v is not code %d × scale %v", i, got, code, step)
				}
				if d := math.Abs(float64(got - rows[i])); d > step/2*1.0001 {
					t.Fatalf("forecast value %d: %v is %v from the given %v (step %v)", i, got, d, rows[i], step)
				}
			}
		})
	}
}
