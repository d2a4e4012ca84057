package gguf

import (
	"fmt"
	"math"
)

// ValueType is a GGUF metadata value type (gguf.h enum gguf_type).
type ValueType uint32

// The GGUF metadata value types.
const (
	Uint8   ValueType = 0
	Int8    ValueType = 1
	Uint16  ValueType = 2
	Int16   ValueType = 3
	Uint32  ValueType = 4
	Int32   ValueType = 5
	Float32 ValueType = 6
	Bool    ValueType = 7
	String  ValueType = 8
	Array   ValueType = 9
	Uint64  ValueType = 10
	Int64   ValueType = 11
	Float64 ValueType = 12
)

var valueTypeNames = [...]string{"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32",
	"FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"}

// String returns the gguf name of v ("UINT32", "ARRAY", ...).
func (v ValueType) String() string {
	if int(v) < len(valueTypeNames) {
		return valueTypeNames[v]
	}
	return fmt.Sprintf("gguf_type(%d)", uint32(v))
}

// size is the encoded size of one scalar of type v, 0 for strings and
// arrays (variable) and for unknown types.
func (v ValueType) size() int {
	switch v {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64:
		return 8
	}
	return 0
}

// TypeOf returns the GGUF value type of a metadata value and, for arrays,
// the element type. ok is false for Go types GGUF cannot store.
func TypeOf(v any) (typ, elem ValueType, ok bool) {
	switch v.(type) {
	case uint8:
		return Uint8, 0, true
	case int8:
		return Int8, 0, true
	case uint16:
		return Uint16, 0, true
	case int16:
		return Int16, 0, true
	case uint32:
		return Uint32, 0, true
	case int32:
		return Int32, 0, true
	case float32:
		return Float32, 0, true
	case bool:
		return Bool, 0, true
	case string:
		return String, 0, true
	case uint64:
		return Uint64, 0, true
	case int64:
		return Int64, 0, true
	case float64:
		return Float64, 0, true
	case []uint8:
		return Array, Uint8, true
	case []int8:
		return Array, Int8, true
	case []uint16:
		return Array, Uint16, true
	case []int16:
		return Array, Int16, true
	case []uint32:
		return Array, Uint32, true
	case []int32:
		return Array, Int32, true
	case []float32:
		return Array, Float32, true
	case []bool:
		return Array, Bool, true
	case []string:
		return Array, String, true
	case []uint64:
		return Array, Uint64, true
	case []int64:
		return Array, Int64, true
	case []float64:
		return Array, Float64, true
	}
	return 0, 0, false
}

// KV is one metadata key/value pair. Value is one of uint8, int8, uint16,
// int16, uint32, int32, float32, bool, string, uint64, int64, float64, or
// a slice of one of those (a GGUF array; arrays do not nest).
type KV struct {
	Key   string
	Value any
}

// Metadata is a file's key/value pairs in file order.
type Metadata []KV

func (m Metadata) index(key string) int {
	for i := range m {
		if m[i].Key == key {
			return i
		}
	}
	return -1
}

// Get returns the value stored under key.
func (m Metadata) Get(key string) (any, bool) {
	if i := m.index(key); i >= 0 {
		return m[i].Value, true
	}
	return nil, false
}

// String returns a string value.
func (m Metadata) String(key string) (string, bool) {
	v, _ := m.Get(key)
	s, ok := v.(string)
	return s, ok
}

// Int returns an integer value of any width, if it fits in an int64.
// Bools and floats are not integers.
func (m Metadata) Int(key string) (int64, bool) {
	v, _ := m.Get(key)
	return toInt64(v)
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// Float returns a float32 or float64 value, or an integer value converted
// to float64.
func (m Metadata) Float(key string) (float64, bool) {
	v, _ := m.Get(key)
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	case uint64:
		return float64(x), true
	}
	if i, ok := toInt64(v); ok {
		return float64(i), true
	}
	return 0, false
}

// Bool returns a bool value.
func (m Metadata) Bool(key string) (bool, bool) {
	v, _ := m.Get(key)
	b, ok := v.(bool)
	return b, ok
}

// Strings returns a string array. The slice is shared with m.
func (m Metadata) Strings(key string) ([]string, bool) {
	v, _ := m.Get(key)
	s, ok := v.([]string)
	return s, ok
}

// Float32s returns a float32 array (shared with m), or a float64 or
// integer array converted to float32.
func (m Metadata) Float32s(key string) ([]float32, bool) {
	v, _ := m.Get(key)
	switch x := v.(type) {
	case []float32:
		return x, true
	case []float64:
		out := make([]float32, len(x))
		for i, f := range x {
			out[i] = float32(f)
		}
		return out, true
	}
	n, get, ok := intArray(v)
	if !ok {
		return nil, false
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(get(i))
	}
	return out, true
}

// Int32s returns an integer array of any width converted to int32. It
// fails if an element does not fit in an int32.
func (m Metadata) Int32s(key string) ([]int32, bool) {
	v, _ := m.Get(key)
	if x, ok := v.([]int32); ok {
		return x, true
	}
	n, get, ok := intArray(v)
	if !ok {
		return nil, false
	}
	out := make([]int32, n)
	for i := range out {
		x := get(i)
		if x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

// intArray gives indexed access to an integer array of any element type.
// uint64 elements above MaxInt64 are reported as MaxInt64 so that range
// checks reject them.
func intArray(v any) (int, func(int) int64, bool) {
	switch x := v.(type) {
	case []uint8:
		return len(x), func(i int) int64 { return int64(x[i]) }, true
	case []int8:
		return len(x), func(i int) int64 { return int64(x[i]) }, true
	case []uint16:
		return len(x), func(i int) int64 { return int64(x[i]) }, true
	case []int16:
		return len(x), func(i int) int64 { return int64(x[i]) }, true
	case []uint32:
		return len(x), func(i int) int64 { return int64(x[i]) }, true
	case []int32:
		return len(x), func(i int) int64 { return int64(x[i]) }, true
	case []int64:
		return len(x), func(i int) int64 { return x[i] }, true
	case []uint64:
		return len(x), func(i int) int64 {
			if x[i] > math.MaxInt64 {
				return math.MaxInt64
			}
			return int64(x[i])
		}, true
	}
	return 0, nil, false
}

// Set replaces the value of key in place, or appends the pair if key is
// new. The value's type is checked when the metadata is written.
func (m *Metadata) Set(key string, v any) {
	if i := m.index(key); i >= 0 {
		(*m)[i].Value = v
		return
	}
	*m = append(*m, KV{key, v})
}

// Delete removes key, keeping the order of the others.
func (m *Metadata) Delete(key string) {
	if i := m.index(key); i >= 0 {
		*m = append((*m)[:i], (*m)[i+1:]...)
	}
}
