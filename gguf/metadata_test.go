package gguf

import (
	"math"
	"reflect"
	"testing"
)

func TestMetadataAccessors(t *testing.T) {
	m := Metadata{
		{"s", "text"}, {"u32", uint32(7)}, {"i8", int8(-3)}, {"u64big", uint64(math.MaxUint64)},
		{"f32", float32(0.5)}, {"f64", 2.5}, {"b", true},
		{"toks", []string{"a", "b"}}, {"scores", []float32{1, 2}}, {"d", []float64{0.5}},
		{"types", []int32{1, 6}}, {"u8s", []uint8{1, 255}}, {"u32s", []uint32{1, 1 << 31}},
	}
	if v, ok := m.String("s"); !ok || v != "text" {
		t.Error("String")
	}
	if _, ok := m.String("u32"); ok {
		t.Error("String of a uint32")
	}
	if v, ok := m.Int("u32"); !ok || v != 7 {
		t.Error("Int of uint32")
	}
	if v, ok := m.Int("i8"); !ok || v != -3 {
		t.Error("Int of int8")
	}
	if _, ok := m.Int("u64big"); ok {
		t.Error("Int of a uint64 above MaxInt64")
	}
	if _, ok := m.Int("b"); ok {
		t.Error("Int of a bool")
	}
	if _, ok := m.Int("f32"); ok {
		t.Error("Int of a float")
	}
	if v, ok := m.Float("f32"); !ok || v != 0.5 {
		t.Error("Float of float32")
	}
	if v, ok := m.Float("u32"); !ok || v != 7 {
		t.Error("Float of uint32")
	}
	if v, ok := m.Float("u64big"); !ok || v != math.MaxUint64 {
		t.Error("Float of big uint64")
	}
	if v, ok := m.Bool("b"); !ok || !v {
		t.Error("Bool")
	}
	if v, ok := m.Strings("toks"); !ok || !reflect.DeepEqual(v, []string{"a", "b"}) {
		t.Error("Strings")
	}
	if v, ok := m.Float32s("scores"); !ok || !reflect.DeepEqual(v, []float32{1, 2}) {
		t.Error("Float32s")
	}
	if v, ok := m.Float32s("d"); !ok || !reflect.DeepEqual(v, []float32{0.5}) {
		t.Error("Float32s of float64")
	}
	if v, ok := m.Float32s("u8s"); !ok || !reflect.DeepEqual(v, []float32{1, 255}) {
		t.Error("Float32s of uint8")
	}
	if v, ok := m.Int32s("types"); !ok || !reflect.DeepEqual(v, []int32{1, 6}) {
		t.Error("Int32s")
	}
	if v, ok := m.Int32s("u8s"); !ok || !reflect.DeepEqual(v, []int32{1, 255}) {
		t.Error("Int32s of uint8")
	}
	if _, ok := m.Int32s("u32s"); ok {
		t.Error("Int32s of a uint32 above MaxInt32")
	}
	if _, ok := m.Int32s("scores"); ok {
		t.Error("Int32s of floats")
	}
	if _, ok := m.Get("missing"); ok {
		t.Error("Get of a missing key")
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
