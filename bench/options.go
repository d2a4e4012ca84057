package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/runtime"
)

// Options configure a speed run. Zero values take the defaults noted.
type Options struct {
	Prompt  int   // tokens of each prompt-processing (pp) test; 0 skips pp (CLI default 512)
	Gen     int   // tokens of each generation (tg) test; 0 skips tg (CLI default 128)
	Depths  []int // context positions filled before each test (default {0})
	Reps    int   // timed repetitions after one untimed warm-up (default 3)
	Threads []int // runtime.Options.Threads values to measure (default {2})
	Batch   int   // runtime.Options.Batch (0: the runtime's default)
	KVF16   bool  // runtime.Options.KVF16

	// Speculative decoding, measured when a draft is given: DraftPath (a
	// model with the target's vocabulary) or DraftLayers (the target's
	// own first N layers, embeddings and head: an early-exit draft).
	DraftPath   string
	DraftLayers int
	K           []int // draft tokens per window (default {4})
	SpecDepth   int   // depth of the speculative runs (default Depths[0])
	// SpecText is the text the speculative runs continue, tokenized with
	// the model's tokenizer: drafts are accepted on real text as they are
	// not on random ids. "" means DefaultSpecText when the model carries a
	// tokenizer, else Prompt random ids (the report says which).
	SpecText string
	// Plans are shard plans whose speculative dialog is also measured,
	// through the staged runtime: spd with the draft model, ssd-q1 with
	// ForecastPath's rows, eaglet with the EAGLE-3 head DraftPath.
	Plans []string
	// ForecastPath holds an ssd-q1 plan's forecast-token embeddings
	// (model.ReadForecastEmbeddings: safetensors or GGUF).
	ForecastPath string
	// Device, when set, adds to every speculative row the device tokens/s
	// qnnpack.EstimateSpec predicts from the row's measured acceptance.
	Device *qnnpack.Device

	// Sanity: every timed run's output (pp: the logits after the prompt;
	// tg: the generated tokens and the last logits) is compared with an
	// untimed reference run on a separate engine with RefThreads threads
	// (default 1) and a batch of 16, which must agree bit for bit (the
	// runtime's results depend neither on threads nor on batching).
	NoSanity   bool
	RefThreads int
	// Tolerance is the largest |Δlogit| accepted as sane (default 0:
	// bit-identical, as the runtime promises).
	Tolerance float64
	// Fault perturbs the timed engines only (tests and --fault).
	Fault *Fault

	// Llama also times llama.cpp (the prebuilt CPU build node-llama-cpp
	// ships) on the same file, depths and thread counts, with the peer
	// LlamaPeer names.
	Llama bool
	// LlamaPeer is how llama.cpp is timed: LlamaPeerBench (llama.cpp's own
	// llama-bench tool, peers.RunLlamaBench: its own random prompt and
	// depth tokens), LlamaPeerNode (node-llama-cpp, peers.LlamaBench: the
	// same token ids as qnnprep, but tg includes the package's per-token
	// JavaScript overhead), or LlamaPeerAuto ("" too): llama-bench when it
	// is installed, else node-llama-cpp.
	LlamaPeer string
	// LlamaTimeout bounds each llama.cpp run (one depth and thread count;
	// 0: peers.Timeout, 10 minutes). A run that fails or times out leaves
	// rows that say why (Result.Error) instead of ending the benchmark.
	LlamaTimeout time.Duration
	// LlamaCPU, with the llama-bench peer, is the variant of ggml's CPU
	// backend llama.cpp may load ("haswell": AVX2 without AVX-512), where
	// llama-bench otherwise loads the best this CPU supports; a run that
	// reports another backend fails. "" leaves the choice to llama-bench.
	LlamaCPU string

	// ProbeBytes bounds what the memory-read probe (ReadCeiling) reads of
	// the model's weights before and after the timings: 0 means all of
	// them, positive at most that many bytes, negative skips the probe
	// (then decode rows carry no read fraction).
	ProbeBytes int64

	Seed uint64    // token ids of the depth fill and the prompt (default 1)
	Log  io.Writer // progress lines (nil: none)
}

// Values of Options.LlamaPeer.
const (
	LlamaPeerAuto  = "auto"
	LlamaPeerBench = "llama-bench"
	LlamaPeerNode  = "node"
)

// Fault deliberately breaks a kernel of the timed engines so that the
// sanity column can be shown to catch a fast but wrong setting: before
// every matrix product whose weight name matches Tensor (a path.Match
// glob, e.g. "blk.0.ffn_down.weight"), its input is multiplied by Scale,
// as a kernel with a wrong scale factor would. It acts through
// runtime.Engine.Observe, whose callback receives the live input. Products
// that share an input rounded once (attn_k and attn_v after attn_q,
// ffn_up after ffn_gate) see the fault of the first of them only.
type Fault struct {
	Tensor string
	Scale  float32
}

// ParseFault parses "TENSOR_GLOB=SCALE".
func ParseFault(s string) (*Fault, error) {
	name, v, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return nil, fmt.Errorf("bench: fault %q: want TENSOR=SCALE", s)
	}
	if _, err := path.Match(name, ""); err != nil {
		return nil, fmt.Errorf("bench: fault %q: %w", s, err)
	}
	f, err := strconv.ParseFloat(v, 32)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("bench: fault %q: scale %q is not a finite number", s, v)
	}
	return &Fault{Tensor: name, Scale: float32(f)}, nil
}

func (f *Fault) String() string { return fmt.Sprintf("%s=%g", f.Tensor, f.Scale) }

func (f *Fault) apply(e *runtime.Engine) (stop func()) {
	return e.Observe(func(tensor string, x []float32, _, _ int) {
		if ok, _ := path.Match(f.Tensor, tensor); ok {
			for i := range x {
				x[i] *= f.Scale
			}
		}
	})
}

func (o *Options) resolve() error {
	if o.Depths == nil {
		o.Depths = []int{0}
	}
	if o.Reps == 0 {
		o.Reps = 3
	}
	if o.Threads == nil {
		o.Threads = []int{2}
	}
	if o.K == nil {
		o.K = []int{4}
	}
	if o.RefThreads == 0 {
		o.RefThreads = 1
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Prompt < 0 || o.Gen < 0 || o.Reps < 1 || o.Batch < 0 || o.Tolerance < 0 || o.RefThreads < 0 || o.DraftLayers < 0 {
		return fmt.Errorf("bench: negative or zero setting (prompt %d, gen %d, reps %d, batch %d, tolerance %g, ref threads %d, draft layers %d)",
			o.Prompt, o.Gen, o.Reps, o.Batch, o.Tolerance, o.RefThreads, o.DraftLayers)
	}
	if o.Prompt == 0 && o.Gen == 0 {
		return errors.New("bench: nothing to measure: prompt and gen are both 0")
	}
	for _, d := range o.Depths {
		if d < 0 {
			return fmt.Errorf("bench: depth %d is negative", d)
		}
	}
	for _, t := range o.Threads {
		if t < 1 {
			return fmt.Errorf("bench: %d threads: want at least 1", t)
		}
	}
	for _, k := range o.K {
		if k < 1 {
			return fmt.Errorf("bench: K %d: want at least 1", k)
		}
	}
	if o.DraftPath != "" && o.DraftLayers > 0 {
		return errors.New("bench: give a draft model or draft layers, not both")
	}
	if err := o.resolveSpec(); err != nil {
		return err
	}
	if o.speculative() && o.Gen < 2 {
		return errors.New("bench: speculative decoding needs gen of at least 2 tokens")
	}
	if o.SpecDepth < 0 {
		return fmt.Errorf("bench: spec depth %d is negative", o.SpecDepth)
	}
	if o.LlamaCPU != "" && (strings.ContainsAny(o.LlamaCPU, `/\.`) || !o.Llama) {
		return fmt.Errorf("bench: llama.cpp CPU variant %q: want a variant name (haswell, zen4, …) and llama.cpp timed", o.LlamaCPU)
	}
	if o.LlamaTimeout < 0 {
		return fmt.Errorf("bench: llama.cpp timeout %v is negative", o.LlamaTimeout)
	}
	switch o.LlamaPeer {
	case "", LlamaPeerAuto, LlamaPeerBench, LlamaPeerNode:
	default:
		return fmt.Errorf("bench: llama peer %q: want auto, llama-bench or node", o.LlamaPeer)
	}
	return nil
}

func (o *Options) speculative() bool {
	return o.DraftPath != "" || o.DraftLayers > 0 || len(o.Plans) > 0
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}
