package model

import (
	"bytes"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/testkit"
)

// Float32 on quantized tensors goes through gguf.Dequantize: compare with
// ggml's own to_float output for the golden rows.
func TestTensorFloat32Quantized(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_K, gguf.F16, gguf.BF16} {
		name := map[gguf.Type]string{gguf.Q8_0: "q8_0", gguf.Q4_K: "q4_K", gguf.F16: "f16", gguf.BF16: "bf16"}[typ]
		q := testkit.Read(t, "ggml-quant-golden/"+name+".quant.bin")
		want := testkit.Read(t, "ggml-quant-golden/"+name+".dequant_f32.bin")
		x := NewTensor("blk.0.ffn_gate.weight", []int64{1024, 4}, typ, q)
		if x.Bytes() != int64(len(q)) {
			t.Fatalf("%v: Bytes %d, file %d", typ, x.Bytes(), len(q))
		}
		v, err := x.Float32()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(encodeFloat32(v), want) {
			t.Errorf("%v: Float32 differs from ggml's dequantization", typ)
		}
		var buf bytes.Buffer
		if n, err := x.WriteTo(&buf); err != nil || n != int64(len(q)) || !bytes.Equal(buf.Bytes(), q) {
			t.Errorf("%v: WriteTo wrote %d bytes, %v", typ, n, err)
		}
	}
}

func TestTensorSizes(t *testing.T) {
	x := LazyTensor("t", []int64{64, 3}, gguf.Q8_0, func() ([]byte, error) { return make([]byte, 3*2*34), nil })
	if x.Elements() != 192 || x.Rows() != 3 || x.Bytes() != 204 {
		t.Errorf("elements %d rows %d bytes %d", x.Elements(), x.Rows(), x.Bytes())
	}
	if _, err := x.Data(); err != nil {
		t.Error(err)
	}
	for _, bad := range []*Tensor{
		NewTensor("a", []int64{48, 2}, gguf.Q8_0, nil),           // 48 not a multiple of 32
		NewTensor("b", []int64{-1, 2}, gguf.F32, nil),            // negative dim
		NewTensor("c", nil, gguf.F32, nil),                       // no dims
		NewTensor("d", []int64{1 << 40, 1 << 40}, gguf.F32, nil), // overflow
		NewTensor("e", []int64{4}, gguf.Type(4), nil),            // removed type id
	} {
		if bad.Bytes() != -1 {
			t.Errorf("%s: Bytes %d, want -1", bad.Name, bad.Bytes())
		}
		if _, err := bad.Data(); err == nil {
			t.Errorf("%s: Data accepted", bad.Name)
		}
	}
}
