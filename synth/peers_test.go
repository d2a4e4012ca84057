package synth

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/testkit"
)

// llama.cpp (node-llama-cpp's prebuilt v0.4.0) loads the synthetic GGUFs
// and decodes them without collapsing into a repeated token.
func TestLlamaCppDecodesSynthetic(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	for _, tc := range []struct {
		arch  model.Arch
		q1    bool
		typ   gguf.Type
		loads bool // also check with LlamaLoads (BOS only)
	}{
		{model.Llama, false, gguf.F32, true},
		{model.Qwen2, false, gguf.F16, false},
		{model.Qwen3, false, gguf.Q8_0, false},
		{model.Qwen35, false, gguf.F32, true},
		{model.Qwen35, true, gguf.Q1_0, false},
		{model.Llama, true, gguf.Q1_0, false},
	} {
		t.Run(fmt.Sprintf("%s-q1=%v-%v", tc.arch, tc.q1, tc.typ), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := WriteGGUF(path, Config(tc.arch, tc.q1), 7, tc.typ); err != nil {
				t.Fatal(err)
			}
			if tc.loads {
				if err := peers.LlamaLoads(path); err != nil {
					t.Fatal(err)
				}
			}
			ids, err := peers.LlamaGreedy(path, []int32{1, 300, 301, 302}, 32, 1)
			if err != nil {
				t.Fatal(err)
			}
			distinct := map[int32]bool{}
			for _, id := range ids {
				distinct[id] = true
			}
			if len(distinct) < 8 {
				t.Errorf("greedy decode is degenerate: %d distinct ids in %v", len(distinct), ids)
			}
		})
	}
}

// @huggingface/gguf reads back the metadata and the tensor table the file
// was written with.
func TestGGUFPeerReadsSynthetic(t *testing.T) {
	testkit.Need(t, peers.HFGGUF)
	cfg := Config(model.Qwen35, true)
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := WriteGGUF(path, cfg, 1, gguf.Q1_0); err != nil {
		t.Fatal(err)
	}
	f, err := peers.GGUFRead(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ggufWriter(cfg, 1, gguf.Q1_0, Weights)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Metadata) != len(w.Metadata) {
		t.Errorf("@huggingface/gguf reads %d KVs, %d written", len(f.Metadata), len(w.Metadata))
	}
	for i := range min(len(f.Metadata), len(w.Metadata)) {
		got, want := f.Metadata[i], w.Metadata[i]
		if got.Key != want.Key || !reflect.DeepEqual(got.Value, peerValue(want.Value)) {
			t.Errorf("KV %d: read %s = %v, wrote %s = %v", i, got.Key, clip(got.Value), want.Key, clip(want.Value))
		}
	}
	theirs := f.Tensors
	want := model.ExpectedTensors(cfg)
	if len(theirs) != len(want) {
		t.Fatalf("@huggingface/gguf lists %d tensors, want %d", len(theirs), len(want))
	}
	for i, x := range theirs {
		typ := uint32(gguf.F32)
		if len(want[i].Dims) == 2 && !strings.HasSuffix(want[i].Name, "ssm_conv1d.weight") {
			typ = uint32(gguf.Q1_0)
		}
		if x.Name != want[i].Name || !slices.Equal(x.Dims, want[i].Dims) || x.Type != typ {
			t.Errorf("tensor %d: %s %v type %d, want %s %v type %d", i, x.Name, x.Dims, x.Type, want[i].Name, want[i].Dims, typ)
		}
	}
}

// peerValue converts a gguf.Metadata value to peers.GGUFKV's form.
func peerValue(v any) any {
	r := reflect.ValueOf(v)
	if r.Kind() == reflect.Slice {
		out := make([]any, r.Len())
		for i := range out {
			out[i] = peerValue(r.Index(i).Interface())
		}
		return out
	}
	switch r.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return r.Uint()
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return r.Int()
	case reflect.Float32, reflect.Float64:
		return r.Float()
	}
	return v
}

func clip(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}
