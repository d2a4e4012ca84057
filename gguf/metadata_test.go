package gguf

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMetadataAccessors(t *testing.T) {
	m := Metadata{
		{"s", "text"}, {"u32", uint32(7)}, {"i8", int8(-3)}, {"u64big", uint64(math.MaxUint64)},
		{"f32", float32(0.5)}, {"f64", 2.5}, {"b", true},
		{"toks", []string{"a", "b"}}, {"scores", []float32{1, 2}}, {"d", []float64{0.5}},
		{"types", []int32{1, 6}}, {"u8s", []uint8{1, 255}}, {"u32s", []uint32{1, 1 << 31}},
	}
	for _, c := range []struct {
		name string
		get  func() (any, bool)
		want any // nil: the accessor must refuse the value
	}{
		{"String", func() (any, bool) { return m.String("s") }, "text"},
		{"String of a uint32", func() (any, bool) { return m.String("u32") }, nil},
		{"Int of uint32", func() (any, bool) { return m.Int("u32") }, int64(7)},
		{"Int of int8", func() (any, bool) { return m.Int("i8") }, int64(-3)},
		{"Int of a uint64 above MaxInt64", func() (any, bool) { return m.Int("u64big") }, nil},
		{"Int of a bool", func() (any, bool) { return m.Int("b") }, nil},
		{"Int of a float", func() (any, bool) { return m.Int("f32") }, nil},
		{"Float of float32", func() (any, bool) { return m.Float("f32") }, float64(0.5)},
		{"Float of uint32", func() (any, bool) { return m.Float("u32") }, float64(7)},
		{"Float of big uint64", func() (any, bool) { return m.Float("u64big") }, float64(math.MaxUint64)},
		{"Bool", func() (any, bool) { return m.Bool("b") }, true},
		{"Strings", func() (any, bool) { return m.Strings("toks") }, []string{"a", "b"}},
		{"Float32s", func() (any, bool) { return m.Float32s("scores") }, []float32{1, 2}},
		{"Float32s of float64", func() (any, bool) { return m.Float32s("d") }, []float32{0.5}},
		{"Float32s of uint8", func() (any, bool) { return m.Float32s("u8s") }, []float32{1, 255}},
		{"Int32s", func() (any, bool) { return m.Int32s("types") }, []int32{1, 6}},
		{"Int32s of uint8", func() (any, bool) { return m.Int32s("u8s") }, []int32{1, 255}},
		{"Int32s of a uint32 above MaxInt32", func() (any, bool) { return m.Int32s("u32s") }, nil},
		{"Int32s of floats", func() (any, bool) { return m.Int32s("scores") }, nil},
		{"Get of a missing key", func() (any, bool) { return m.Get("missing") }, nil},
	} {
		v, ok := c.get()
		if c.want == nil {
			assert.False(t, ok, c.name)
			continue
		}
		if assert.True(t, ok, c.name) {
			assert.Equal(t, c.want, v, c.name)
		}
	}

	m.Set("u32", uint32(9))
	m.Set("new", "x")
	if v, _ := m.Int("u32"); v != 9 || m[1].Key != "u32" {
		t.Error("Set did not replace in place")
	}
	if m[len(m)-1].Key != "new" {
		t.Error("Set did not append")
	}
	m.Delete("s")
	if _, ok := m.Get("s"); ok || m[0].Key != "u32" {
		t.Error("Delete")
	}
}

func TestTypeOfAndValueTypeNames(t *testing.T) {
	if typ, elem, ok := TypeOf([]int16{}); !ok || typ != Array || elem != Int16 {
		t.Error("TypeOf []int16")
	}
	if _, _, ok := TypeOf(3); ok {
		t.Error("TypeOf int")
	}
	if Float64.String() != "FLOAT64" || ValueType(13).String() != "gguf_type(13)" {
		t.Error("ValueType.String")
	}
}
