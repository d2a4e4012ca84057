package runtime_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit"
)

// These tests hold the runtime to an independent implementation: llama.cpp
// (through node-llama-cpp) decoding the very same GGUF file.
//
// Random synthetic models have flat logits, so greedy decoding meets
// near-ties that two correct implementations may break differently. A seed
// is therefore chosen by looking at OUR logits alone: the first seed whose
// greedy path never has a top-2 gap below minGap of the logit spread. On
// that path the ids must then be identical, with no tolerance.
const (
	genTokens = 32
	minGap    = 2e-3
)

var prompt = []int32{1, 300, 301, 302, 303, 304}

func engine(t *testing.T, path string) *runtime.Engine {
	t.Helper()
	m, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	// KVF16: attention as llama.cpp's CPU backend computes it by default.
	e, err := runtime.New(m, runtime.Options{Threads: 2, KVF16: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// minMargin is the smallest top-2 gap, relative to the logit spread, over
// the teacher-forced rows of prompt+ids that choose the generated tokens.
func minMargin(t *testing.T, e *runtime.Engine, prompt, ids []int32) float64 {
	t.Helper()
	seq := append(append([]int32{}, prompt...), ids...)
	rows, err := e.Logits(context.Background(), seq[:len(seq)-1])
	if err != nil {
		t.Fatal(err)
	}
	m := math.Inf(1)
	for _, r := range rows[len(prompt)-1:] {
		first, second := float32(math.Inf(-1)), float32(math.Inf(-1))
		lo, hi := r[0], r[0]
		for _, v := range r {
			lo, hi = min(lo, v), max(hi, v)
			if v > first {
				first, second = v, first
			} else if v > second {
				second = v
			}
		}
		m = min(m, float64(first-second)/float64(hi-lo))
	}
	return m
}

// pickModel writes synthetic GGUFs for seeds 1, 2, … and returns the first
// whose greedy path from prompt has no near-tie.
func pickModel(t *testing.T, cfg model.Config, typ gguf.Type) (string, *runtime.Engine, []int32) {
	t.Helper()
	return pickModelFor(t, cfg, typ, prompt)
}

func pickModelFor(t *testing.T, cfg model.Config, typ gguf.Type, prompt []int32) (string, *runtime.Engine, []int32) {
	t.Helper()
	for seed := uint64(1); seed <= 12; seed++ {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("seed%d.gguf", seed))
		if err := synth.WriteGGUF(path, cfg, seed, typ); err != nil {
			t.Fatal(err)
		}
		e := engine(t, path)
		ids, err := e.Greedy(context.Background(), prompt, genTokens)
		if err != nil {
			t.Fatal(err)
		}
		if mm := minMargin(t, e, prompt, ids); mm >= minGap {
			return path, e, ids
		}
	}
	t.Fatalf("no seed in 1..12 gives a greedy path without near-ties (gap < %g)", minGap)
	return "", nil, nil
}

func TestGreedyMatchesLlamaCpp(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	for _, arch := range []model.Arch{model.Llama, model.Qwen3} {
		for _, typ := range []gguf.Type{gguf.F32, gguf.Q8_0, gguf.Q1_0} {
			t.Run(fmt.Sprintf("%s-%v", arch, typ), func(t *testing.T) {
				path, _, ours := pickModel(t, synth.Config(arch, true), typ)
				theirs, err := peers.LlamaGreedy(path, prompt, genTokens, 1)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(ours, theirs) {
					t.Errorf("greedy ids differ:\n qnnprep   %v\n llama.cpp %v", ours, theirs)
				}
			})
		}
	}
}

// For F32 weights the two must agree on every teacher-forced argmax and
// on the logits themselves (cosine of the max-shifted rows ≥ 0.9999).
func TestTeacherForcedLogitsMatchLlamaCpp(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	for _, arch := range []model.Arch{model.Llama, model.Qwen3} {
		t.Run(string(arch), func(t *testing.T) {
			path, e, ids := pickModel(t, synth.Config(arch, true), gguf.F32)
			seq := append(append([]int32{}, prompt...), ids...)
			theirs, err := peers.LlamaLogits(path, seq)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := e.Logits(context.Background(), seq)
			if err != nil {
				t.Fatal(err)
			}
			if len(theirs) != len(ours) {
				t.Fatalf("llama.cpp gave %d rows, we %d", len(theirs), len(ours))
			}
			agree, worst := 0, 1.0
			for i := range ours {
				if argmax(ours[i]) == argmax(theirs[i]) {
					agree++
				}
				worst = min(worst, shiftedCosine(ours[i], theirs[i]))
			}
			t.Logf("%d positions: top-1 agreement %d/%d, min cosine %.7f", len(ours), agree, len(ours), worst)
			if agree != len(ours) {
				t.Errorf("top-1 agreement %d/%d, want 100%%", agree, len(ours))
			}
			if worst < 0.9999 {
				t.Errorf("min logit cosine %.6f < 0.9999", worst)
			}
		})
	}
}

// A hybrid qwen35 model written both as an HF checkpoint and as a GGUF with
// llama.cpp's names decodes identically from both, and as llama.cpp does.
func TestQwen35HybridHFAndGGUFMatchLlamaCpp(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	cfg := synth.Config(model.Qwen35, true)
	path, _, fromGGUF := pickModel(t, cfg, gguf.F32)
	var seed uint64
	fmt.Sscanf(filepath.Base(path), "seed%d.gguf", &seed)
	hf := filepath.Join(t.TempDir(), "hf")
	if err := synth.WriteHF(hf, cfg, seed, 2); err != nil {
		t.Fatal(err)
	}
	fromHF, err := engine(t, hf).Greedy(context.Background(), prompt, genTokens)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromHF, fromGGUF) {
		t.Errorf("HF and GGUF forms decode differently:\n HF   %v\n GGUF %v", fromHF, fromGGUF)
	}
	theirs, err := peers.LlamaGreedy(path, prompt, genTokens, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromGGUF, theirs) {
		t.Errorf("greedy ids differ from llama.cpp:\n qnnprep   %v\n llama.cpp %v", fromGGUF, theirs)
	}
}

func argmax(r []float32) int {
	best := 0
	for i, v := range r {
		if v > r[best] {
			best = i
		}
	}
	return best
}

// shiftedCosine compares two logit rows after subtracting each row's
// maximum (node-llama-cpp gives logits only up to that constant), skipping
// entries llama.cpp reports as −Inf (probability underflow).
func shiftedCosine(a, b []float32) float64 {
	ma, mb := a[argmax(a)], b[argmax(b)]
	var ab, aa, bb float64
	for i := range a {
		if math.IsInf(float64(b[i]), -1) {
			continue
		}
		x, y := float64(a[i]-ma), float64(b[i]-mb)
		ab += x * y
		aa += x * x
		bb += y * y
	}
	return ab / math.Sqrt(aa*bb)
}
