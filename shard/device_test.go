package shard

import (
	"errors"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
)

// q8Tensor is a Q8_0 tensor of rows × cols whose block b of row r has scale
// scale(r, b).
func q8Tensor(rows, cols int, scale func(r, b int) float32) *model.Tensor {
	nb := cols / 32
	data := make([]byte, 0, rows*nb*34)
	for r := range rows {
		for b := range nb {
			h := half.F32ToF16(scale(r, b))
			data = append(data, byte(h), byte(h>>8))
			data = append(data, make([]byte, 32)...)
		}
	}
	return model.NewTensor("w", []int64{int64(cols), int64(rows)}, gguf.Q8_0, data)
}

func TestWeightLayout(t *testing.T) {
	shape := func(typ gguf.Type, dims ...int64) *model.Tensor {
		return model.LazyTensor("w", dims, typ, func() ([]byte, error) { return nil, errors.New("not read") })
	}
	perRow := q8Tensor(3, 64, func(r, _ int) float32 { return float32(r + 1) })
	perBlock := q8Tensor(3, 64, func(r, b int) float32 { return float32(r + b + 1) })
	tests := []struct {
		name  string
		t     *model.Tensor
		c     Container
		want  Layout
		bytes int64
	}{
		// 4 rows × 2 blocks of 128: 1024 codes of 4 bits, 8 scales.
		{"Q1_0 4bit", shape(gguf.Q1_0, 256, 4), Container4Bit, Layout{Bits: 4, Integer: true, BlockSize: 128, Scales: 8}, 512 + 8*8},
		{"Q1_0 8bit", shape(gguf.Q1_0, 256, 4), Container8Bit, Layout{Bits: 8, Integer: true, BlockSize: 128, Scales: 8}, 1024 + 8*8},
		{"Q2_0 4bit", shape(gguf.Q2_0, 128, 2), Container4Bit, Layout{Bits: 4, Integer: true, BlockSize: 64, Scales: 4}, 128 + 4*8},
		{"Q8_0 per channel", perRow, Container4Bit, Layout{Bits: 8, Integer: true, Scales: 3}, 192 + 3*8},
		{"Q8_0 per block", perBlock, Container4Bit, Layout{Bits: 8, Integer: true, BlockSize: 32, Scales: 6}, 192 + 6*8},
		{"F16 matrix", shape(gguf.F16, 64, 3), Container4Bit, Layout{Bits: 32}, 4 * 192},
		{"F32 vector", shape(gguf.F32, 64), Container8Bit, Layout{Bits: 32}, 4 * 64},
		{"Q4_K as float", shape(gguf.Q4_K, 256, 2), Container4Bit, Layout{Bits: 32}, 4 * 512},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := WeightLayout(tt.t, tt.c)
			if err != nil {
				t.Fatal(err)
			}
			if l != tt.want {
				t.Errorf("layout %+v, want %+v", l, tt.want)
			}
			if b, _ := DeviceBytes(tt.t, tt.c); b != tt.bytes {
				t.Errorf("device bytes %d, want %d", b, tt.bytes)
			}
		})
	}
	for _, bad := range []struct {
		t *model.Tensor
		c Container
	}{{shape(gguf.Q1_0, 200, 4), Container4Bit}, {shape(gguf.Q1_0, 128, 2, 2), Container4Bit}, {shape(gguf.Q1_0, 128, 2), Container(2)}} {
		if _, err := WeightLayout(bad.t, bad.c); err == nil {
			t.Errorf("%v %v in %d bits: no error", bad.t.Type, bad.t.Dims, bad.c)
		}
	}
}

// q1Model is a model of configuration cfg whose tensors have only shapes:
// matrices Q1_0, the output head Q2_0, vectors F32 (the q1 recipe).
func q1Model(t testing.TB, cfg model.Config) *model.Model {
	t.Helper()
	var ts []*model.Tensor
	for _, s := range model.ExpectedTensors(cfg) {
		typ := gguf.F32
		switch {
		case s.Name == "output.weight":
			typ = gguf.Q2_0
		case len(s.Dims) == 2 && s.Dims[1] > 1:
			typ = gguf.Q1_0
		}
		ts = append(ts, model.LazyTensor(s.Name, s.Dims, typ, func() ([]byte, error) { return nil, errors.New("shape only") }))
	}
	m, err := model.New(cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// qwen3_8B is Qwen3-8B's shape (config.json of Qwen/Qwen3-8B).
func qwen3_8B() model.Config {
	c := model.Config{
		Arch: model.Qwen3, VocabSize: 151936, Hidden: 4096, Layers: 36, FFN: 12288,
		Heads: 32, KVHeads: 8, HeadDim: 128, RopeDim: 128, RopeNeox: true, QKNorm: true,
		ContextLength: 40960, RopeTheta: 1000000, RMSEps: 1e-6, BOS: -1, EOS: 151645,
	}
	c.LayerKinds = make([]model.LayerKind, c.Layers)
	return c
}

// A Qwen3-8B-shaped q1 model fits one stage by its qmodel bytes (Q1_0 is
// 1.125 bits per weight) but not in a 4-bit container (4.5 bits): the plan
// sizes it by what the device holds, so one stage breaks the 2 GiB rule and
// balancing by bytes splits it.
func TestDeviceBytesQ1Qwen3_8B(t *testing.T) {
	m := q1Model(t, qwen3_8B())
	one, err := PlanModel(m, Options{Stages: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := one.Stages[0]
	t.Logf("one stage: %d device bytes (%.2f GiB, %s), %d qmodel bytes (%.2f GiB)",
		st.Bytes, float64(st.Bytes)/(1<<30), one.Container, st.QModelBytes, float64(st.QModelBytes)/(1<<30))
	if st.QModelBytes >= DefaultMaxStageBytes || st.Bytes <= DefaultMaxStageBytes {
		t.Fatalf("stage: qmodel %d, device %d bytes; want the qmodel under 2 GiB and the device over", st.QModelBytes, st.Bytes)
	}
	// Q1_0 in 4 bits holds 4/1.125 as many bytes per code plus 8-byte
	// scale/offset pairs per block of 128 (versus the 2-byte fp16 d).
	if r := float64(st.Bytes) / float64(st.QModelBytes); r < 3.5 || r > 4.2 {
		t.Errorf("device/qmodel ratio %.2f, want about 4", r)
	}
	vs := Check(one, CheckEnv{})
	if len(vs) != 1 || vs[0].Rule != RuleContextBytes || !strings.Contains(vs[0].Message, "4bit container") {
		t.Errorf("violations %v, want one %s naming the container", vs, RuleContextBytes)
	}

	bal, err := PlanModel(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(bal.Stages) < 2 {
		t.Fatalf("balanced plan has %d stages", len(bal.Stages))
	}
	var dev, q int64
	for _, s := range bal.Stages {
		if s.Bytes > DefaultMaxStageBytes {
			t.Errorf("stage %d: %d device bytes over the limit", s.Index, s.Bytes)
		}
		dev, q = dev+s.Bytes, q+s.QModelBytes
	}
	if dev != st.Bytes || q != st.QModelBytes {
		t.Errorf("balanced stages sum to %d/%d bytes, the single stage holds %d/%d", dev, q, st.Bytes, st.QModelBytes)
	}
	if vs := Check(bal, CheckEnv{}); len(vs) != 0 {
		t.Errorf("balanced plan: %v", vs)
	}
	t.Logf("balanced: %d stages", len(bal.Stages))

	// --max-stage-bytes balances by device bytes too.
	small, err := PlanModel(m, Options{MaxStageBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(small.Stages); int64(n) < (st.Bytes+(1<<30)-1)>>30 {
		t.Errorf("1 GiB stages: %d, fewer than %d GiB of device bytes needs", n, st.Bytes>>30)
	}

	// The 8-bit container doubles the codes.
	eight, err := PlanModel(m, Options{Stages: 1, Container: Container8Bit})
	if err != nil {
		t.Fatal(err)
	}
	if e := eight.Stages[0]; e.QModelBytes != st.QModelBytes || e.Bytes <= st.Bytes || eight.Container != Container8Bit {
		t.Errorf("8bit stage %d/%d bytes in %s, 4bit %d/%d", e.Bytes, e.QModelBytes, eight.Container, st.Bytes, st.QModelBytes)
	}
}
