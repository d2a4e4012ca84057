package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path"
	goruntime "runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
)

// SchemaID is the value of Report.Schema; schema.json describes it.
const SchemaID = "https://qnnprep.dev/schema/bench-report-1.json"

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

	Seed uint64    // token ids of the depth fill and the prompt (default 1)
	Log  io.Writer // progress lines (nil: none)
}

// Values of Options.LlamaPeer.
const (
	LlamaPeerAuto  = "auto"
	LlamaPeerBench = "llama-bench"
	LlamaPeerNode  = "node"
)

// llamaPeer resolves Options.LlamaPeer to the peer that times llama.cpp
// (peers.LlamaBenchBin or peers.NodeLlamaCpp), checking that it is there.
func (o *Options) llamaPeer() (string, error) {
	switch o.LlamaPeer {
	case "", LlamaPeerAuto:
		if peers.Check(peers.LlamaBenchBin) == nil {
			return peers.LlamaBenchBin, nil
		}
		if err := peers.Check(peers.NodeLlamaCpp); err != nil {
			return "", fmt.Errorf("bench: --llama: neither llama-bench nor node-llama-cpp is installed: %w", err)
		}
		return peers.NodeLlamaCpp, nil
	case LlamaPeerBench:
		if err := peers.Check(peers.LlamaBenchBin); err != nil {
			return "", fmt.Errorf("bench: --llama-peer llama-bench: %w", err)
		}
		return peers.LlamaBenchBin, nil
	case LlamaPeerNode:
		if err := peers.Check(peers.NodeLlamaCpp); err != nil {
			return "", fmt.Errorf("bench: --llama-peer node: %w", err)
		}
		return peers.NodeLlamaCpp, nil
	}
	return "", fmt.Errorf("bench: llama peer %q: want auto, llama-bench or node", o.LlamaPeer)
}

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

// Report is the outcome of Run for one model (an element of
// Suite.Reports).
type Report struct {
	Model       ModelInfo    `json:"model"`
	Draft       *ModelInfo   `json:"draft,omitempty"`
	Machine     Machine      `json:"machine"`
	Settings    Settings     `json:"settings"`
	Results     []Result     `json:"results"`
	Speculative []SpecResult `json:"speculative"`
	// PeakRSS is the process's peak resident set during the run (mapped
	// model pages included).
	PeakRSS int64   `json:"peak_rss_bytes"`
	Seconds float64 `json:"seconds"` // wall time of the whole run
	// Sane is false when any checked run disagreed with its reference.
	Sane bool `json:"sane"`
}

// ModelInfo describes a benchmarked model.
type ModelInfo struct {
	Path   string `json:"path"`
	Arch   string `json:"arch"`
	Params int64  `json:"params"`
	Bytes  int64  `json:"bytes"`  // file size (0 for a directory or an in-memory draft)
	Type   string `json:"type"`   // type holding most of the matrix bytes
	Layers int    `json:"layers"` // decoder layers
}

// Machine is where the numbers were measured.
type Machine struct {
	GOOS      string     `json:"goos"`
	GOARCH    string     `json:"goarch"`
	CPUs      int        `json:"cpus"`
	GoVersion string     `json:"go_version"`
	Kernels   string     `json:"kernels"`    // "asm" or "purego"
	LoadStart [3]float64 `json:"load_start"` // load averages when the run began
	LoadEnd   [3]float64 `json:"load_end"`
}

// Settings are the resolved options.
type Settings struct {
	Prompt     int     `json:"prompt"`
	Gen        int     `json:"gen"`
	Depths     []int   `json:"depths"`
	Reps       int     `json:"reps"`
	Threads    []int   `json:"threads"`
	Batch      int     `json:"batch"`
	KVF16      bool    `json:"kv_f16"`
	K          []int   `json:"k,omitempty"`
	SpecDepth  int     `json:"spec_depth"`
	Sanity     bool    `json:"sanity"`
	RefThreads int     `json:"ref_threads"`
	Tolerance  float64 `json:"tolerance"`
	Fault      string  `json:"fault,omitempty"`
	Seed       uint64  `json:"seed"`
}

// Result is one test (pp or tg) at one depth and thread count.
type Result struct {
	Engine       string    `json:"engine"`         // "qnnprep" or "llama.cpp"
	Peer         string    `json:"peer,omitempty"` // what timed a llama.cpp row: "llama-bench" or "node-llama-cpp" (none in older reports: node-llama-cpp)
	Test         string    `json:"test"`           // "pp512", "tg128" (llama-bench's names)
	Kind         string    `json:"kind"`           // "pp" or "tg"
	Tokens       int       `json:"tokens"`
	Depth        int       `json:"depth"`
	Threads      int       `json:"threads"`
	TokensPerSec float64   `json:"tokens_per_s"` // mean over the repetitions
	Stddev       float64   `json:"stddev"`       // sample standard deviation of the per-repetition tokens/s
	Samples      []float64 `json:"samples"`      // tokens/s of each timed repetition
	Load         float64   `json:"load"`         // 1-minute load average, mean of before and after
	// Sane is nil when not checked (llama.cpp rows, NoSanity), else
	// whether every repetition matched the reference.
	Sane       *bool   `json:"sane"`
	SanityNote string  `json:"sanity_note,omitempty"` // what differed
	MaxAbsDiff float64 `json:"max_abs_diff"`          // largest |Δlogit| against the reference
	// VsLlama is this row's tokens/s over llama.cpp's for the same test,
	// depth and threads (0 when llama.cpp was not measured).
	VsLlama float64 `json:"vs_llama_cpp,omitempty"`
	PeakRSS int64   `json:"peak_rss_bytes"` // peak resident set of the process measuring it (so far)
}

// SpecResult is speculative decoding with one window size against plain
// greedy decoding of the same prompt on the same engine.
type SpecResult struct {
	K                   int     `json:"k"`
	Threads             int     `json:"threads"`
	Depth               int     `json:"depth"`  // prompt length before decoding
	Tokens              int     `json:"tokens"` // tokens generated (timed: all but the first)
	GreedyTokensPerSec  float64 `json:"greedy_tokens_per_s"`
	SpecTokensPerSec    float64 `json:"spec_tokens_per_s"`
	Speedup             float64 `json:"speedup"`           // greedy time / speculative time
	SpeedupStddev       float64 `json:"speedup_stddev"`    // over repetitions
	WindowSeconds       float64 `json:"window_seconds"`    // mean time of one draft+verify window
	AcceptanceLength    float64 `json:"acceptance_length"` // draft tokens accepted per window
	AcceptanceRate      float64 `json:"acceptance_rate"`
	TargetCallsPerToken float64 `json:"target_calls_per_token"`
	Load                float64 `json:"load"`
	Sane                bool    `json:"sane"` // speculative tokens equal greedy tokens
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
	if o.speculative() && o.Gen < 2 {
		return errors.New("bench: speculative decoding needs gen of at least 2 tokens")
	}
	if o.SpecDepth < 0 {
		return fmt.Errorf("bench: spec depth %d is negative", o.SpecDepth)
	}
	switch o.LlamaPeer {
	case "", LlamaPeerAuto, LlamaPeerBench, LlamaPeerNode:
	default:
		return fmt.Errorf("bench: llama peer %q: want auto, llama-bench or node", o.LlamaPeer)
	}
	return nil
}

func (o *Options) speculative() bool { return o.DraftPath != "" || o.DraftLayers > 0 }

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Run measures the model at path: for each thread count and depth, pp
// (Prompt tokens processed in one Forward) and tg (Gen tokens generated
// one Forward at a time) after the context was filled to the depth, as
// llama-bench does; then speculative decoding when a draft is given, and
// llama.cpp when Options.Llama is set.
func Run(ctx context.Context, path string, opt Options) (*Report, error) {
	if err := opt.resolve(); err != nil {
		return nil, err
	}
	// The llama.cpp peer is resolved first, so that a missing one fails
	// before the qnnprep timings rather than after.
	var llamaPeer string
	if opt.Llama {
		var err error
		if llamaPeer, err = opt.llamaPeer(); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	ResetPeakRSS()
	m, err := model.Open(path)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	rep := &Report{
		Model:   modelInfo(m, path),
		Machine: machine(),
		Sane:    true,
		Settings: Settings{
			Prompt: opt.Prompt, Gen: opt.Gen, Depths: opt.Depths, Reps: opt.Reps, Threads: opt.Threads,
			Batch: opt.Batch, KVF16: opt.KVF16, Sanity: !opt.NoSanity, RefThreads: opt.RefThreads,
			Tolerance: opt.Tolerance, Seed: opt.Seed,
		},
		Results: []Result{}, Speculative: []SpecResult{},
	}
	if opt.Fault != nil {
		rep.Settings.Fault = opt.Fault.String()
	}
	cfg := m.Config
	maxDepth := 0
	for _, d := range opt.Depths {
		maxDepth = max(maxDepth, d)
	}
	specDepth := opt.Depths[0]
	if opt.SpecDepth > 0 {
		specDepth = opt.SpecDepth
	}
	maxK := 0
	for _, k := range opt.K {
		maxK = max(maxK, k)
	}
	specPrompt := max(opt.Prompt, 1)
	need := max(maxDepth+max(opt.Prompt, opt.Gen+1), specDepth+specPrompt+opt.Gen+maxK+1)
	fill := tokens(cfg, max(maxDepth, specDepth), opt.Seed, true)
	prompt := tokens(cfg, max(opt.Prompt, 1), opt.Seed+1, false)

	var draft *model.Model
	if opt.speculative() {
		rep.Settings.K, rep.Settings.SpecDepth = opt.K, specDepth
		if opt.DraftPath != "" {
			if draft, err = model.Open(opt.DraftPath); err != nil {
				return nil, err
			}
			defer draft.Close()
			di := modelInfo(draft, opt.DraftPath)
			rep.Draft = &di
		} else {
			if draft, err = TruncatedDraft(m, opt.DraftLayers); err != nil {
				return nil, err
			}
			di := modelInfo(draft, "")
			di.Path = fmt.Sprintf("%s (first %d layers)", path, opt.DraftLayers)
			rep.Draft = &di
		}
	}

	var refs map[int]*reference
	if !opt.NoSanity {
		refs = map[int]*reference{}
		// The untimed reference reads the weights from the file mapping, so
		// the process does not hold a second in-memory copy of the model.
		re, err := runtime.New(m, runtime.Options{Threads: opt.RefThreads, Context: need, Batch: 16, KVF16: opt.KVF16, MapWeights: true})
		if err != nil {
			return nil, err
		}
		for _, d := range opt.Depths {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			opt.logf("reference: depth %d (%d threads, batch 16, untimed)", d, opt.RefThreads)
			r, err := runReference(re, cfg, fill[:d], prompt[:opt.Prompt], opt.Gen)
			if err != nil {
				return nil, err
			}
			refs[d] = r
		}
	}

	// llama.cpp's runs for a thread count follow qnnprep's at once: the
	// machine's speed drifts over minutes, and a ratio is only as good as
	// the closeness in time of its two sides.
	runLlama := func(th int) error {
		for _, d := range opt.Depths {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			opt.logf("llama.cpp (%s): depth %d, %d threads", llamaPeer, d, th)
			l0 := LoadAvg()[0]
			var lb *peers.LlamaBenchResult
			var err error
			if llamaPeer == peers.LlamaBenchBin {
				lb, err = peers.RunLlamaBench(path, peers.LlamaBenchArgs{
					Threads: th, Prompt: opt.Prompt, Gen: opt.Gen, Depth: d, Reps: opt.Reps,
				})
			} else {
				lb, err = peers.LlamaBench(path, peers.LlamaBenchRequest{
					Threads: th, DepthIDs: fill[:d], PromptIDs: prompt[:opt.Prompt], Gen: opt.Gen, Reps: opt.Reps,
				})
			}
			if err != nil {
				return err
			}
			load := (l0 + LoadAvg()[0]) / 2
			if opt.Prompt > 0 {
				rep.Results = append(rep.Results, llamaResult(llamaPeer, "pp", opt.Prompt, d, th, lb.PPSeconds, load, lb.PeakRSS))
			}
			if opt.Gen > 0 {
				rep.Results = append(rep.Results, llamaResult(llamaPeer, "tg", opt.Gen, d, th, lb.TGSeconds, load, lb.PeakRSS))
			}
		}
		return nil
	}

	for _, th := range opt.Threads {
		e, err := runtime.New(m, runtime.Options{Threads: th, Context: need, Batch: opt.Batch, KVF16: opt.KVF16})
		if err != nil {
			return nil, err
		}
		stop := func() {}
		if opt.Fault != nil {
			stop = opt.Fault.apply(e)
		}
		for _, d := range opt.Depths {
			res, err := measure(ctx, e, &opt, th, d, fill[:d], prompt[:opt.Prompt], refs[d])
			if err != nil {
				stop()
				return nil, err
			}
			rep.Results = append(rep.Results, res...)
		}
		if draft != nil {
			de, err := runtime.New(draft, runtime.Options{Threads: th, Context: need, Batch: opt.Batch, KVF16: opt.KVF16})
			if err != nil {
				stop()
				return nil, err
			}
			sp := append(append([]int32(nil), fill[:specDepth]...), prompt[:specPrompt]...)
			res, err := measureSpec(ctx, e, de, &opt, th, specDepth, sp)
			if err != nil {
				stop()
				return nil, err
			}
			rep.Speculative = append(rep.Speculative, res...)
		}
		stop()
		if opt.Llama {
			if err := runLlama(th); err != nil {
				return nil, err
			}
		}
	}

	if opt.Llama {
		ratios(rep.Results)
	}

	for _, r := range rep.Results {
		if r.Sane != nil && !*r.Sane {
			rep.Sane = false
		}
	}
	for _, s := range rep.Speculative {
		rep.Sane = rep.Sane && s.Sane
	}
	rep.Machine.LoadEnd = LoadAvg()
	rep.PeakRSS = PeakRSS()
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// tokens returns n deterministic ids: with bos, the model's BOS first;
// the rest uniform over the vocabulary past the first three (special)
// ids.
func tokens(cfg model.Config, n int, seed uint64, bos bool) []int32 {
	rng := rand.New(rand.NewPCG(seed, 0x62656e6368))
	out := make([]int32, n)
	lo := min(3, cfg.VocabSize-1)
	for i := range out {
		out[i] = int32(lo + rng.IntN(cfg.VocabSize-lo))
	}
	if bos && n > 0 && cfg.BOS >= 0 && int(cfg.BOS) < cfg.VocabSize {
		out[0] = int32(cfg.BOS)
	}
	return out
}

// firstToken is what tg feeds first: the greedy choice after the depth
// fill, or BOS on an empty context.
func firstToken(cfg model.Config, logits []float32) int32 {
	if logits != nil {
		return runtime.Argmax(logits)
	}
	if cfg.BOS >= 0 && int(cfg.BOS) < cfg.VocabSize {
		return int32(cfg.BOS)
	}
	return 0
}

// reference is the untimed output the timed runs must reproduce.
type reference struct {
	ppLogits []float32 // after the prompt
	tgTokens []int32
	tgLogits []float32 // the last tg step's
}

func runReference(e *runtime.Engine, cfg model.Config, fill, prompt []int32, gen int) (*reference, error) {
	base, last, err := prefill(e, fill)
	if err != nil {
		return nil, err
	}
	r := &reference{}
	if len(prompt) > 0 {
		if r.ppLogits, err = base.Clone().Forward(prompt); err != nil {
			return nil, err
		}
	}
	if gen > 0 {
		if r.tgTokens, r.tgLogits, err = generate(base.Clone(), firstToken(cfg, last), gen); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func prefill(e *runtime.Engine, fill []int32) (*runtime.State, []float32, error) {
	st := e.NewState()
	if len(fill) == 0 {
		return st, nil, nil
	}
	l, err := st.Forward(fill)
	return st, l, err
}

// generate runs n single-token steps from tok: the tg test.
func generate(st *runtime.State, tok int32, n int) ([]int32, []float32, error) {
	out := make([]int32, 0, n)
	var l []float32
	var err error
	for range n {
		if l, err = st.Forward([]int32{tok}); err != nil {
			return nil, nil, err
		}
		tok = runtime.Argmax(l)
		out = append(out, tok)
	}
	return out, l, nil
}

// measure times pp and tg at one depth: the context is filled once
// (untimed) and each repetition runs on a clone of it.
func measure(ctx context.Context, e *runtime.Engine, opt *Options, threads, depth int, fill, prompt []int32, ref *reference) ([]Result, error) {
	cfg := e.Config()
	opt.logf("qnnprep: depth %d, %d threads: filling the context", depth, threads)
	base, last, err := prefill(e, fill)
	if err != nil {
		return nil, err
	}
	var out []Result
	if len(prompt) > 0 {
		r := Result{Engine: "qnnprep", Test: fmt.Sprintf("pp%d", len(prompt)), Kind: "pp", Tokens: len(prompt), Depth: depth, Threads: threads}
		l0 := LoadAvg()[0]
		var chk checker
		for rep := -1; rep < opt.Reps; rep++ { // rep −1: warm-up
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			st := base.Clone()
			t0 := time.Now()
			logits, err := st.Forward(prompt)
			dt := time.Since(t0).Seconds()
			if err != nil {
				return nil, err
			}
			if rep >= 0 {
				r.Samples = append(r.Samples, float64(len(prompt))/dt)
			}
			if ref != nil {
				chk.logits(ref.ppLogits, logits)
			}
		}
		finish(&r, l0, ref != nil, &chk, opt.Tolerance)
		opt.logf("qnnprep: %s depth %d, %d threads: %.2f ± %.2f tokens/s", r.Test, depth, threads, r.TokensPerSec, r.Stddev)
		out = append(out, r)
	}
	if opt.Gen > 0 {
		r := Result{Engine: "qnnprep", Test: fmt.Sprintf("tg%d", opt.Gen), Kind: "tg", Tokens: opt.Gen, Depth: depth, Threads: threads}
		l0 := LoadAvg()[0]
		var chk checker
		first := firstToken(cfg, last)
		for rep := -1; rep < opt.Reps; rep++ {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			st := base.Clone()
			t0 := time.Now()
			toks, logits, err := generate(st, first, opt.Gen)
			dt := time.Since(t0).Seconds()
			if err != nil {
				return nil, err
			}
			if rep >= 0 {
				r.Samples = append(r.Samples, float64(opt.Gen)/dt)
			}
			if ref != nil {
				chk.tokens(ref.tgTokens, toks)
				chk.logits(ref.tgLogits, logits)
			}
		}
		finish(&r, l0, ref != nil, &chk, opt.Tolerance)
		opt.logf("qnnprep: %s depth %d, %d threads: %.2f ± %.2f tokens/s", r.Test, depth, threads, r.TokensPerSec, r.Stddev)
		out = append(out, r)
	}
	return out, nil
}

// checker accumulates the differences between timed runs and their
// reference.
type checker struct {
	maxDiff  float64
	tokenErr string
}

func (c *checker) logits(want, got []float32) {
	if len(want) != len(got) {
		c.maxDiff = math.Inf(1)
		return
	}
	for i := range want {
		d := math.Abs(float64(want[i]) - float64(got[i]))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		c.maxDiff = max(c.maxDiff, d)
	}
}

func (c *checker) tokens(want, got []int32) {
	if c.tokenErr != "" {
		return
	}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			g := "none"
			if i < len(got) {
				g = strconv.Itoa(int(got[i]))
			}
			c.tokenErr = fmt.Sprintf("token %d is %s, reference %d", i, g, want[i])
			return
		}
	}
}

func finish(r *Result, load0 float64, checked bool, c *checker, tol float64) {
	r.TokensPerSec, r.Stddev = meanStd(r.Samples)
	r.Load = (load0 + LoadAvg()[0]) / 2
	r.PeakRSS = PeakRSS()
	if !checked {
		return
	}
	ok := c.tokenErr == "" && c.maxDiff <= tol
	r.Sane = &ok
	r.MaxAbsDiff = c.maxDiff
	switch {
	case c.tokenErr != "":
		r.SanityNote = c.tokenErr
	case !ok:
		r.SanityNote = fmt.Sprintf("max |Δlogit| %.3g > %g", c.maxDiff, tol)
	}
	if math.IsInf(r.MaxAbsDiff, 0) {
		r.MaxAbsDiff = math.MaxFloat32 // JSON has no infinity
	}
}

func meanStd(x []float64) (mean, std float64) {
	if len(x) == 0 {
		return 0, 0
	}
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss / float64(len(x)-1))
}

// measureSpec times plain greedy decoding and speculative decoding with
// each K on the same prompt; both exclude the prompt's pass.
func measureSpec(ctx context.Context, e, de *runtime.Engine, opt *Options, threads, depth int, prompt []int32) ([]SpecResult, error) {
	n := opt.Gen
	greedy := make([]float64, 0, opt.Reps)
	var want []int32
	l0 := LoadAvg()[0]
	for rep := -1; rep < opt.Reps; rep++ {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var toks []int32
		var t1 time.Time
		err := e.NewState().Generate(ctx, prompt, n, func(s runtime.Step) bool {
			if s.Index == 0 {
				t1 = time.Now()
			}
			toks = append(toks, s.Token)
			return true
		})
		if err != nil {
			return nil, err
		}
		if rep >= 0 {
			greedy = append(greedy, time.Since(t1).Seconds())
		}
		want = toks
	}
	gmean, _ := meanStd(greedy)
	opt.logf("qnnprep: greedy after %d tokens, %d threads: %.2f tokens/s", len(prompt), threads, float64(n-1)/gmean)
	var out []SpecResult
	for _, k := range opt.K {
		r := SpecResult{K: k, Threads: threads, Depth: len(prompt), Tokens: n, Sane: true, GreedyTokensPerSec: float64(n-1) / gmean}
		var secs, speedups []float64
		var st runtime.SpecStats
		for rep := -1; rep < opt.Reps; rep++ {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			d, err := runtime.NewDraftModel(e, de)
			if err != nil {
				return nil, err
			}
			got, s, err := e.Speculate(ctx, d, prompt, n, k)
			if err != nil {
				return nil, err
			}
			if len(got) != len(want) {
				r.Sane = false
			}
			for i := range min(len(got), len(want)) {
				r.Sane = r.Sane && got[i] == want[i]
			}
			if rep >= 0 {
				secs = append(secs, s.Seconds)
				speedups = append(speedups, greedy[rep]/s.Seconds)
				st = s
			}
		}
		smean, _ := meanStd(secs)
		r.SpecTokensPerSec = float64(n-1) / smean
		r.Speedup, r.SpeedupStddev = meanStd(speedups)
		if st.Windows > 0 {
			r.WindowSeconds = smean / float64(st.Windows)
		}
		r.AcceptanceLength, r.AcceptanceRate, r.TargetCallsPerToken = st.AcceptanceLength(), st.AcceptanceRate(), st.TargetCallsPerToken()
		r.Load = (l0 + LoadAvg()[0]) / 2
		opt.logf("qnnprep: speculative K=%d, %d threads: %.2f tokens/s, speed-up %.2f, acceptance length %.2f", k, threads, r.SpecTokensPerSec, r.Speedup, r.AcceptanceLength)
		out = append(out, r)
	}
	return out, nil
}

func llamaResult(peer, kind string, tokens, depth, threads int, secs []float64, load float64, rss int64) Result {
	r := Result{Engine: "llama.cpp", Peer: peer, Test: fmt.Sprintf("%s%d", kind, tokens), Kind: kind, Tokens: tokens, Depth: depth, Threads: threads, Load: load, PeakRSS: rss}
	for _, s := range secs {
		r.Samples = append(r.Samples, float64(tokens)/s)
	}
	r.TokensPerSec, r.Stddev = meanStd(r.Samples)
	return r
}

// ratios fills VsLlama of every qnnprep row that has a llama.cpp twin.
func ratios(rs []Result) {
	type key struct {
		test           string
		depth, threads int
	}
	ll := map[key]float64{}
	for _, r := range rs {
		if r.Engine == "llama.cpp" {
			ll[key{r.Test, r.Depth, r.Threads}] = r.TokensPerSec
		}
	}
	for i := range rs {
		if v := ll[key{rs[i].Test, rs[i].Depth, rs[i].Threads}]; rs[i].Engine == "qnnprep" && v > 0 {
			rs[i].VsLlama = rs[i].TokensPerSec / v
		}
	}
}

// TruncatedDraft returns a model made of m's embeddings, first n decoder
// layers, final norm and output head (tensors shared, nothing copied): an
// early-exit draft with the target's vocabulary.
func TruncatedDraft(m *model.Model, n int) (*model.Model, error) {
	cfg := m.Config
	if n < 1 || n >= cfg.Layers {
		return nil, fmt.Errorf("bench: draft of %d layers: want 1 to %d for %s", n, cfg.Layers-1, m.Path)
	}
	cfg.Layers = n
	cfg.LayerKinds = append([]model.LayerKind(nil), cfg.LayerKinds[:n]...)
	var ts []*model.Tensor
	for _, s := range model.ExpectedTensors(cfg) {
		t := m.Tensor(s.Name)
		if t == nil {
			if s.Optional {
				continue
			}
			return nil, fmt.Errorf("bench: %s: no tensor %q for the draft", m.Path, s.Name)
		}
		ts = append(ts, t)
	}
	return model.New(cfg, ts)
}

func modelInfo(m *model.Model, p string) ModelInfo {
	mi := ModelInfo{Path: p, Arch: string(m.Config.Arch), Layers: m.Config.Layers}
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
		mi.Bytes = fi.Size()
	}
	byType := map[gguf.Type]int64{}
	for _, t := range m.Tensors {
		mi.Params += t.Elements()
		if len(t.Dims) == 2 {
			byType[t.Type] += t.Bytes()
		}
	}
	var types []gguf.Type
	for t := range byType {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		if byType[types[i]] != byType[types[j]] {
			return byType[types[i]] > byType[types[j]]
		}
		return types[i] < types[j]
	})
	if len(types) > 0 {
		mi.Type = types[0].String()
	}
	return mi
}

func machine() Machine {
	m := Machine{GOOS: goruntime.GOOS, GOARCH: goruntime.GOARCH, CPUs: goruntime.NumCPU(), GoVersion: goruntime.Version(), Kernels: Kernels, LoadStart: LoadAvg()}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.GoVersion != "" {
		m.GoVersion = bi.GoVersion
	}
	return m
}
