package gguf

import (
	"encoding/binary"
	"math"
	"slices"
)

// This file builds GGUF bytes field by field, independently of the
// package's writer, so reader tests can craft both valid and broken files.

type rawKV struct {
	key string
	val []byte // the encoded value type followed by the value
}

type rawTensor struct {
	name string
	dims []int64
	typ  uint32
	off  uint64
}

type rawFile struct {
	magic    string
	version  uint32
	nTensors *uint64 // override the real count
	nKV      *uint64
	kvs      []rawKV
	tensors  []rawTensor
	align    int64 // padding used before the data section
	data     []byte
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func cat(parts ...[]byte) []byte { return slices.Concat(parts...) }

func rawStr(s string) []byte { return cat(le64(uint64(len(s))), []byte(s)) }

// Encoded values: type id then payload.
func vStr(s string) []byte  { return cat(le32(8), rawStr(s)) }
func vU32(v uint32) []byte  { return cat(le32(4), le32(v)) }
func vU64(v uint64) []byte  { return cat(le32(10), le64(v)) }
func vI32(v int32) []byte   { return cat(le32(5), le32(uint32(v))) }
func vF32(v float32) []byte { return cat(le32(6), le32(math.Float32bits(v))) }
func vBool(b byte) []byte   { return cat(le32(7), []byte{b}) }
func vArr(elem uint32, n uint64, payload ...[]byte) []byte {
	return cat(le32(9), le32(elem), le64(n), cat(payload...))
}

func u64p(v uint64) *uint64 { return &v }

func (r rawFile) bytes() []byte {
	var b []byte
	b = append(b, r.magic...)
	b = append(b, le32(r.version)...)
	nt, nkv := uint64(len(r.tensors)), uint64(len(r.kvs))
	if r.nTensors != nil {
		nt = *r.nTensors
	}
	if r.nKV != nil {
		nkv = *r.nKV
	}
	b = append(b, le64(nt)...)
	b = append(b, le64(nkv)...)
	for _, kv := range r.kvs {
		b = append(b, rawStr(kv.key)...)
		b = append(b, kv.val...)
	}
	for _, t := range r.tensors {
		b = append(b, rawStr(t.name)...)
		b = append(b, le32(uint32(len(t.dims)))...)
		for _, d := range t.dims {
			b = append(b, le64(uint64(d))...)
		}
		b = append(b, le32(t.typ)...)
		b = append(b, le64(t.off)...)
	}
	if len(r.tensors) > 0 && r.align > 0 {
		for int64(len(b))%r.align != 0 {
			b = append(b, 0)
		}
	}
	return append(b, r.data...)
}

// baseFile is a small valid file: three pairs, an F32 tensor of 32 bytes
// and a Q8_0 tensor of 34 bytes padded to 64, alignment 32.
func baseFile() rawFile {
	data := make([]byte, 96)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	for i := 66; i < 96; i++ { // padding after tensor "b"
		data[i] = 0
	}
	return rawFile{
		magic:   "GGUF",
		version: 3,
		kvs: []rawKV{
			{"general.architecture", vStr("llama")},
			{"tokenizer.ggml.tokens", vArr(8, 2, rawStr("<s>"), rawStr("hi"))},
			{"general.alignment", vU32(32)},
		},
		tensors: []rawTensor{
			{"a", []int64{4, 2}, uint32(F32), 0},
			{"b", []int64{32}, uint32(Q8_0), 32},
		},
		align: 32,
		data:  data,
	}
}
