package tokenizer

import (
	"fmt"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
)

// GGUF keys of the vocabulary (llama.cpp's LLM_KV_TOKENIZER_*).
const (
	keyModel          = "tokenizer.ggml.model"
	keyPre            = "tokenizer.ggml.pre"
	keyTokens         = "tokenizer.ggml.tokens"
	keyScores         = "tokenizer.ggml.scores"
	keyTypes          = "tokenizer.ggml.token_type"
	keyMerges         = "tokenizer.ggml.merges"
	keyBOS            = "tokenizer.ggml.bos_token_id"
	keyEOS            = "tokenizer.ggml.eos_token_id"
	keyUNK            = "tokenizer.ggml.unknown_token_id"
	keyPAD            = "tokenizer.ggml.padding_token_id"
	keyAddBOS         = "tokenizer.ggml.add_bos_token"
	keyAddEOS         = "tokenizer.ggml.add_eos_token"
	keyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
)

// FromGGUF reads the tokenizer.ggml.* keys of a GGUF file. Keys that are
// absent take llama.cpp's defaults (SPM: BOS 1, EOS 2, UNK 0, add BOS and
// a space prefix; BPE: BOS = EOS = 11). A special-token id outside the
// vocabulary (such as 0xFFFFFFFF for "none") keeps the default, as in
// llama.cpp. Other tokenizer.* keys are kept in Vocab.Extra. For a model
// named Phi-3 (general.name) the special tokens get RStrip, as llama.cpp
// sets it.
func FromGGUF(md gguf.Metadata) (*Vocab, error) {
	v := &Vocab{}
	var ok bool
	if v.Model, ok = md.String(keyModel); !ok {
		return nil, ggufKeyError(md, keyModel, "a string")
	}
	if v.Model != ModelSPM && v.Model != ModelBPE {
		return nil, fmt.Errorf("tokenizer: gguf %s = %q: unsupported tokenizer model (want %q or %q)", keyModel, v.Model, ModelSPM, ModelBPE)
	}
	v.Pre = "default"
	if _, present := md.Get(keyPre); present {
		if v.Pre, ok = md.String(keyPre); !ok {
			return nil, ggufKeyError(md, keyPre, "a string")
		}
		if v.Pre == "" {
			v.Pre = "default" // as llama.cpp reads an empty name
		}
	}
	if v.Tokens, ok = md.Strings(keyTokens); !ok {
		return nil, ggufKeyError(md, keyTokens, "a string array")
	}
	n := len(v.Tokens)
	if _, present := md.Get(keyScores); present {
		if v.Scores, ok = md.Float32s(keyScores); !ok || len(v.Scores) != n {
			return nil, ggufKeyError(md, keyScores, fmt.Sprintf("a float32 array of %d scores", n))
		}
	}
	if _, present := md.Get(keyTypes); present {
		if v.Types, ok = md.Int32s(keyTypes); !ok || len(v.Types) != n {
			return nil, ggufKeyError(md, keyTypes, fmt.Sprintf("an int32 array of %d token types", n))
		}
	}
	if _, present := md.Get(keyMerges); present {
		if v.Merges, ok = md.Strings(keyMerges); !ok {
			return nil, ggufKeyError(md, keyMerges, "a string array")
		}
	}
	if v.Model == ModelSPM {
		v.BOS, v.EOS, v.UNK, v.PAD = 1, 2, 0, -1
		v.AddBOS, v.AddSpacePrefix = true, true
	} else {
		v.BOS, v.EOS, v.UNK, v.PAD = 11, 11, -1, -1
		v.AddBOS = preTokenizers[v.Pre] != nil && preTokenizers[v.Pre] == preTokenizers["llama-bpe"]
	}
	for _, id := range []struct {
		key string
		dst *int32
	}{{keyBOS, &v.BOS}, {keyEOS, &v.EOS}, {keyUNK, &v.UNK}, {keyPAD, &v.PAD}} {
		if int(*id.dst) >= n {
			*id.dst = -1
		}
		if _, present := md.Get(id.key); !present {
			continue
		}
		x, ok := md.Int(id.key)
		if !ok {
			return nil, ggufKeyError(md, id.key, "an integer")
		}
		if x >= 0 && x < int64(n) {
			*id.dst = int32(x)
		}
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{{keyAddBOS, &v.AddBOS}, {keyAddEOS, &v.AddEOS}, {keyAddSpacePrefix, &v.AddSpacePrefix}} {
		if _, present := md.Get(b.key); !present {
			continue
		}
		if *b.dst, ok = md.Bool(b.key); !ok {
			return nil, ggufKeyError(md, b.key, "a bool")
		}
	}
	if v.AddBOS && v.BOS < 0 {
		v.AddBOS = false
	}
	if v.AddEOS && v.EOS < 0 {
		v.AddEOS = false
	}
	for _, kv := range md {
		if strings.HasPrefix(kv.Key, "tokenizer.") && !ownKey(kv.Key) {
			v.Extra = append(v.Extra, kv)
		}
	}
	if name, _ := md.String("general.name"); strings.Contains(strings.ToLower(name), "phi-3") ||
		strings.Contains(strings.ToLower(name), "phi3") {
		v.RStrip = phi3RStrip(v)
	}
	if err := v.validate(); err != nil {
		return nil, fmt.Errorf("gguf vocab: %w", err)
	}
	return v, nil
}

// phi3RStrip gives the tokens llama.cpp marks rstrip for models named
// Phi-3 (as their HF tokenizer does): every special token and </s>, except
// <unk>, <s> and <|endoftext|>.
func phi3RStrip(v *Vocab) []int32 {
	ids := make(map[string]int32, len(v.Tokens))
	for i, s := range v.Tokens {
		ids[s] = int32(i)
	}
	var out []int32
	for i, typ := range llamaCppTypes(v, ids) {
		s := v.Tokens[i]
		switch {
		case s == "<unk>" || s == "<s>" || s == "<|endoftext|>":
		case typ == TypeControl || typ == TypeUserDefined || typ == TypeUnknown || s == "</s>":
			out = append(out, int32(i))
		}
	}
	return out
}

func ownKey(k string) bool {
	switch k {
	case keyModel, keyPre, keyTokens, keyScores, keyTypes, keyMerges, keyBOS, keyEOS, keyUNK, keyPAD,
		keyAddBOS, keyAddEOS, keyAddSpacePrefix:
		return true
	}
	return false
}

func ggufKeyError(md gguf.Metadata, key, want string) error {
	v, present := md.Get(key)
	if !present {
		return fmt.Errorf("tokenizer: gguf metadata has no %s (want %s)", key, want)
	}
	typ, elem, _ := gguf.TypeOf(v)
	got := typ.String()
	if typ == gguf.Array {
		got = fmt.Sprintf("%s of %s (%d elements)", got, elem, arrayLen(v))
	}
	return fmt.Errorf("tokenizer: gguf %s is %s, want %s", key, got, want)
}

func arrayLen(v any) int {
	switch x := v.(type) {
	case []string:
		return len(x)
	case []float32:
		return len(x)
	case []int32:
		return len(x)
	case []uint32:
		return len(x)
	}
	return -1
}

// GGUFMetadata returns the tokenizer.ggml.* keys llama.cpp reads, in the
// order its converters write them, followed by Extra.
func (v *Vocab) GGUFMetadata() gguf.Metadata {
	md := gguf.Metadata{
		{Key: keyModel, Value: v.Model},
		{Key: keyPre, Value: v.Pre},
		{Key: keyTokens, Value: v.Tokens},
	}
	if v.Scores != nil {
		md = append(md, gguf.KV{Key: keyScores, Value: v.Scores})
	}
	if v.Types != nil {
		md = append(md, gguf.KV{Key: keyTypes, Value: v.Types})
	}
	if v.Model == ModelBPE || len(v.Merges) > 0 {
		md = append(md, gguf.KV{Key: keyMerges, Value: v.Merges})
	}
	for _, id := range []struct {
		key string
		id  int32
	}{{keyBOS, v.BOS}, {keyEOS, v.EOS}, {keyUNK, v.UNK}, {keyPAD, v.PAD}} {
		if id.id >= 0 {
			md = append(md, gguf.KV{Key: id.key, Value: uint32(id.id)})
		} else {
			// Written as "none" so that llama.cpp's defaults (BOS 1, EOS 2, ...) do not apply.
			md = append(md, gguf.KV{Key: id.key, Value: uint32(0xFFFFFFFF)})
		}
	}
	md = append(md,
		gguf.KV{Key: keyAddBOS, Value: v.AddBOS},
		gguf.KV{Key: keyAddEOS, Value: v.AddEOS},
		gguf.KV{Key: keyAddSpacePrefix, Value: v.AddSpacePrefix},
	)
	for _, kv := range v.Extra {
		if !ownKey(kv.Key) {
			md.Set(kv.Key, kv.Value)
		}
	}
	return md
}
