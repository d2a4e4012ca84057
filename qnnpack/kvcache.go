package qnnpack

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// Genie's KV cache file (qualla cache-file.hpp; kvmanager.cpp
// dumpKVCache/loadKVCache, smart-mask.cpp dumpCache/loadCache, QAIRT 2.40),
// which ssd-q1 restores as the forecast prefix from
// <forecast-prefix-name>/kv-cache.primary.qnn-htp (qnn-genie.md §1.4):
//
//	header (16 bytes, little-endian):
//	  uint32 num_tensors   2 × KV layers
//	  uint32 magic         0xC0DE
//	  uint8  dtype         0 = u8, 1 = u16, 9 = f16, 10 = f32
//	  uint8  pad
//	  uint16 n_heads       the largest KV head count
//	  uint16 embed_dim     head_dim (Genie's kv-dim)
//	  uint16 update_size   cached positions
//	keys:   per KV layer in graph order, n_heads × embed_dim rows of update_size elements
//	values: per KV layer, n_heads × update_size rows of embed_dim elements
//	scales: float64 key scale per layer, then value scale per layer (written by
//	        dumpKVCache, not read by loadKVCache)
const (
	CacheMagic      = 0xC0DE
	cacheHeaderSize = 16
	// ForecastPrefixFile is the file ssd-q1 restores, in the
	// forecast-prefix-name directory (role "primary").
	ForecastPrefixFile = "kv-cache.primary.qnn-htp"
)

// CacheSpec is a KV cache file header.
type CacheSpec struct {
	NumTensors uint32
	DType      uint8
	NHeads     uint16
	EmbedDim   uint16
	UpdateSize uint16
}

// Cache dtypes and their element sizes.
const (
	CacheU8  = 0
	CacheU16 = 1
	CacheF16 = 9
	CacheF32 = 10
)

func cacheElemBytes(dtype uint8) int {
	switch dtype {
	case CacheU8:
		return 1
	case CacheU16, CacheF16:
		return 2
	case CacheF32:
		return 4
	}
	return 0
}

// DataBytes is the size of the keys and values after the header.
func (s CacheSpec) DataBytes() int64 {
	return int64(s.NumTensors) * int64(s.NHeads) * int64(s.EmbedDim) * int64(s.UpdateSize) * int64(cacheElemBytes(s.DType))
}

// ForecastPrefixSpec is the cache header an ssd-q1 forecast prefix for p
// must have: one key and one value tensor per attention layer, kvBits-bit
// KV (8 or 16), forecast-prefix positions.
func ForecastPrefixSpec(p *shard.Plan, kvBits int) (CacheSpec, error) {
	if p.Dialog.Type != shard.SSD {
		return CacheSpec{}, fmt.Errorf("qnnpack: dialog %s has no forecast prefix", p.Dialog.Type)
	}
	layers := 0
	for _, k := range p.Model.LayerKinds {
		if k == model.Attention.String() {
			layers++
		}
	}
	s := CacheSpec{NumTensors: uint32(2 * layers)}
	switch kvBits {
	case 8:
		s.DType = CacheU8
	case 16:
		s.DType = CacheU16
	default:
		return s, fmt.Errorf("qnnpack: KV cache of %d bits; Genie's quantized KV is 8 or 16", kvBits)
	}
	for _, f := range []struct {
		name string
		v    int
		dst  *uint16
	}{{"kv heads", p.Model.KVHeads, &s.NHeads}, {"head dim", p.Model.HeadDim, &s.EmbedDim}, {"forecast-prefix", p.Dialog.ForecastPrefix, &s.UpdateSize}} {
		if f.v <= 0 || f.v > math.MaxUint16 {
			return s, fmt.Errorf("qnnpack: forecast prefix: %s = %d does not fit the cache file's uint16 field", f.name, f.v)
		}
		*f.dst = uint16(f.v)
	}
	return s, nil
}

// WritePlaceholderCache writes a KV cache file of spec whose keys and
// values are all zero codes and whose scales are 1. It has the shape Genie
// checks (it loads and ssd-q1 finds forecast-prefix entries) but is NOT a
// real forecast prefix: SSD drafts will be poor until the prefix is
// computed from the model and quantized with the past_*_in encodings.
func WritePlaceholderCache(w io.Writer, spec CacheSpec) error {
	if err := writeCacheHeader(w, spec); err != nil {
		return err
	}
	zero := make([]byte, 64<<10)
	for n := spec.DataBytes(); n > 0; {
		k := min(n, int64(len(zero)))
		if _, err := w.Write(zero[:k]); err != nil {
			return err
		}
		n -= k
	}
	scale := make([]byte, 8)
	binary.LittleEndian.PutUint64(scale, math.Float64bits(1))
	for range spec.NumTensors {
		if _, err := w.Write(scale); err != nil {
			return err
		}
	}
	return nil
}

func writeCacheHeader(w io.Writer, s CacheSpec) error {
	var h [cacheHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], s.NumTensors)
	binary.LittleEndian.PutUint32(h[4:], CacheMagic)
	h[8] = s.DType
	binary.LittleEndian.PutUint16(h[10:], s.NHeads)
	binary.LittleEndian.PutUint16(h[12:], s.EmbedDim)
	binary.LittleEndian.PutUint16(h[14:], s.UpdateSize)
	_, err := w.Write(h[:])
	return err
}

// ReadCacheSpec reads and checks a KV cache file's header against its size
// (size is the whole file's length): the data must be exactly the keys and
// values, optionally followed by the float64 scales.
func ReadCacheSpec(r io.Reader, size int64, name string) (CacheSpec, error) {
	var h [cacheHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return CacheSpec{}, fmt.Errorf("qnnpack: KV cache %s: header: %w", name, err)
	}
	s := CacheSpec{
		NumTensors: binary.LittleEndian.Uint32(h[0:]),
		DType:      h[8],
		NHeads:     binary.LittleEndian.Uint16(h[10:]),
		EmbedDim:   binary.LittleEndian.Uint16(h[12:]),
		UpdateSize: binary.LittleEndian.Uint16(h[14:]),
	}
	if m := binary.LittleEndian.Uint32(h[4:]); m != CacheMagic {
		return s, fmt.Errorf("qnnpack: KV cache %s: magic %#x, want 0xc0de", name, m)
	}
	if cacheElemBytes(s.DType) == 0 {
		return s, fmt.Errorf("qnnpack: KV cache %s: dtype %d, want 0 (u8), 1 (u16), 9 (f16) or 10 (f32)", name, s.DType)
	}
	if s.NumTensors == 0 || s.NumTensors%2 != 0 {
		return s, fmt.Errorf("qnnpack: KV cache %s: num_tensors %d, want a positive even count (a key and a value per layer)", name, s.NumTensors)
	}
	// One tensor is at most 2^16·2^16·2^16·4 = 2^50 bytes; bound the count
	// so the total cannot overflow.
	perTensor := int64(s.NHeads) * int64(s.EmbedDim) * int64(s.UpdateSize) * int64(cacheElemBytes(s.DType))
	if perTensor > 0 && int64(s.NumTensors) > size/perTensor {
		return s, fmt.Errorf("qnnpack: KV cache %s: %d tensors of %d bytes do not fit in %d bytes", name, s.NumTensors, perTensor, size)
	}
	data := s.DataBytes()
	body := size - cacheHeaderSize
	if body != data && body != data+8*int64(s.NumTensors) {
		return s, fmt.Errorf("qnnpack: KV cache %s: %d data bytes, want %d (%d tensors × %d heads × %d dims × %d positions × %d B) or that plus %d bytes of scales",
			name, body, data, s.NumTensors, s.NHeads, s.EmbedDim, s.UpdateSize, cacheElemBytes(s.DType), 8*s.NumTensors)
	}
	return s, nil
}
