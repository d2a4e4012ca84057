package pipeline

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/shard"
)

// graphDeviceBytes is what graph's initializers of at least min elements
// weigh on the device: an encoded parameter its codes in the encoding's
// width plus a scale/offset pair per scale, any other float32.
func graphDeviceBytes(t *testing.T, dir, graph string, min int64) (total int64, names map[string]int64) {
	t.Helper()
	mp, err := onnx.Read(filepath.Join(dir, graph+".onnx"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := onnx.ReadEncodings(filepath.Join(dir, graph+".encodings.json"))
	if err != nil {
		t.Fatal(err)
	}
	names = map[string]int64{}
	for _, in := range mp.GetGraph().GetInitializer() {
		n := int64(1)
		for _, d := range in.Dims {
			n *= d
		}
		if n < min {
			continue
		}
		b := 4 * n
		if e := enc.Param(in.Name); e != nil {
			b = (n*int64(e.BW)+7)/8 + int64(len(e.Scale))*shard.ScaleOffsetBytes
		}
		names[in.Name] = b
		total += b
	}
	return total, names
}

// TestStageBytesAreGraphBytes: every stage's plan bytes are what its
// exported graph holds on the device, for a plain, an eaglet and an
// ssd-q1 plan, and SizedFor finds them in the plan's own qmodel.
func TestStageBytesAreGraphBytes(t *testing.T) {
	src, cfg := synthLlama(t)
	for _, tc := range []struct {
		name string
		d    shard.Dialog
	}{
		{"plain", shard.Dialog{}},
		{"eaglet", shard.Dialog{Type: shard.Eaglet, DraftLen: 3, NBranches: 2, MaxTargetTokens: 8}},
		{"ssd-q1", shard.Dialog{Type: shard.SSD, ForecastTokenCount: 3, Branches: []int{2, 1}, ForecastPrefix: 8, ForecastPrefixName: "forecast-prefix"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := options(t, src, filepath.Join(dir, "out"), "int8")
			o.Plan.Dialog = tc.d
			switch tc.d.Type {
			case shard.Eaglet:
				o.Eagle3 = writeEagle3(t, cfg)
			case shard.SSD:
				o.ForecastEmbeddings = filepath.Join(dir, "forecast.safetensors")
				writeRows(t, o.ForecastEmbeddings, 3, cfg.Hidden, 2)
			}
			res, err := Build(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			p := res.Plan
			// SizedFor measures the qmodel as the planner did.
			qm, err := model.Open(filepath.Join(o.OutDir, WorkDir, QModelName))
			if err != nil {
				t.Fatal(err)
			}
			defer qm.Close()
			if err := p.SizedFor(qm); err != nil {
				t.Errorf("SizedFor its own qmodel: %v", err)
			}
			for _, st := range p.Stages {
				got, names := graphDeviceBytes(t, filepath.Join(o.OutDir, WorkDir, ONNXDir), st.Graphs[0], int64(cfg.Hidden))
				if got != st.Bytes {
					t.Errorf("stage %d: plan %d bytes, graph %s %d bytes (%+d): %v", st.Index, st.Bytes, st.Graphs[0], got, got-st.Bytes, names)
				}
			}
		})
	}
}
