package quantize_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit"
)

// Every recipe's output must be a file llama.cpp loads and decodes, and
// our runtime must decode it to the same greedy ids: that is what makes the
// qmodel checkable by an independent implementation.
func TestQuantizedSyntheticLlamaDecodesInLlamaCpp(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	dir := t.TempDir()
	src := filepath.Join(dir, "llama-f32.gguf")
	cfg := synth.Config(model.Llama, true) // every row a multiple of 128
	if err := synth.WriteGGUF(src, cfg, 7, gguf.F32); err != nil {
		t.Fatal(err)
	}
	m, err := model.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := []int32{1, 300, 301, 302, 303, 304, 305}
	for _, recipe := range []string{"q1", "q8_0", "int8"} {
		t.Run(recipe, func(t *testing.T) {
			out := filepath.Join(dir, recipe+".gguf")
			md, _ := synth.VocabMetadata(cfg.VocabSize)
			rep, err := quantize.Run(context.Background(), m, out, quantize.Options{Recipe: quantize.Recipes[recipe], Metadata: md})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Fallbacks) != 0 {
				t.Errorf("unexpected fallbacks: %v", rep.Fallbacks)
			}
			theirs, err := peers.LlamaGreedy(out, prompt, 32, 1)
			if err != nil {
				t.Fatalf("llama.cpp on the %s qmodel: %v", recipe, err)
			}
			q, err := model.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			// KVF16: attention as llama.cpp computes it (F16 KV cache), for a like-for-like comparison.
			e, err := runtime.New(q, runtime.Options{Threads: 2, KVF16: true})
			if err != nil {
				t.Fatal(err)
			}
			ours, err := e.Greedy(context.Background(), prompt, 32)
			if err != nil {
				t.Fatal(err)
			}
			// Exact agreement over all 32 tokens on synthetic models is the
			// runtime's test (runtime/peer_test.go picks paths without
			// near-ties); here the file must decode sensibly in llama.cpp
			// and start out the same in both.
			distinct := map[int32]bool{}
			for _, id := range theirs {
				distinct[id] = true
			}
			if len(theirs) != 32 || len(distinct) < 8 {
				t.Errorf("llama.cpp output on the %s qmodel looks degenerate: %v", recipe, theirs)
			}
			if !reflect.DeepEqual(ours[:8], theirs[:8]) {
				t.Errorf("greedy ids differ on the %s qmodel:\n qnnprep   %v\n llama.cpp %v", recipe, ours, theirs)
			}
		})
	}
}
