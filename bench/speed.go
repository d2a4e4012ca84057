package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"strconv"
	"time"

	"github.com/qnnprep/qnnprep/internal/outpath"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// Run measures the model at path: for each thread count and depth, pp
// (Prompt tokens processed in one Forward) and tg (Gen tokens generated
// one Forward at a time) after the context was filled to the depth, as
// llama-bench does; then speculative decoding when a draft is given, and
// llama.cpp when Options.Llama is set. The memory-read probe reads the
// model's own weights before the timed rows and again after them.
//
// When the model fails (it does not open, or a run returns an error) Run
// returns the error with the report of what was measured: the rows not
// measured say why (Result.Error), as Report.Error does. Errors that
// concern no model in particular (the options, a missing llama.cpp peer)
// and an interrupt return no report.
func Run(ctx context.Context, path string, opt Options) (*Report, error) {
	if err := opt.resolve(); err != nil {
		return nil, err
	}
	// The llama.cpp peer is resolved first, so that a missing one fails
	// before the qnnprep timings rather than after.
	var llama *llamaRunner
	if opt.Llama {
		var err error
		if llama, err = opt.newLlamaRunner(); err != nil {
			return nil, err
		}
		defer llama.close()
	}
	start := time.Now()
	ResetPeakRSS()
	rep := &Report{
		Model:   ModelInfo{Path: path}, // all of it once the model opens
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
	err := run(ctx, rep, path, &opt, llama)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		rep.fail(err, &opt)
	}
	if opt.Llama {
		ratios(rep.Results)
	}
	readRates(rep.Results, rep.Model.DecodeBytes, rep.Machine.ReadCeiling)
	for _, r := range rep.Results {
		if r.Sane != nil && !*r.Sane {
			rep.Sane = false
		}
	}
	for _, s := range rep.Speculative {
		rep.Sane = rep.Sane && s.Sane
	}
	rep.PeakRSS = PeakRSS()
	rep.Machine.LoadEnd = LoadAvg()
	rep.Seconds = time.Since(start).Seconds()
	return rep, err
}

// run fills rep with the measurements of the model at path.
func run(ctx context.Context, rep *Report, path string, opt *Options, llama *llamaRunner) error {
	m, err := model.Open(path)
	if err != nil {
		return err
	}
	defer m.Close()
	rep.Model = modelInfo(m, path)
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
	fill := tokens(cfg, max(maxDepth, specDepth), opt.Seed, true)
	prompt := tokens(cfg, max(opt.Prompt, 1), opt.Seed+1, false)
	specIn := prompt
	if opt.speculative() {
		ids, what, err := specPrompt(m, path, opt.SpecText, prompt)
		if err != nil {
			return err
		}
		specIn, rep.Settings.SpecPrompt = ids, what
	}
	need := max(maxDepth+max(opt.Prompt, opt.Gen+1), specDepth+len(specIn)+opt.Gen+maxK+1)

	sb := &specBench{opt: opt, m: m, need: need}
	eagle3 := opt.DraftPath != "" && runtime.IsEagle3(opt.DraftPath)
	if opt.speculative() {
		sb.prompt = append(append([]int32(nil), fill[:specDepth]...), specIn...)
		rep.Settings.SpecDepth, rep.Settings.Plans, rep.Settings.Device = specDepth, opt.Plans, opt.Device
		if opt.DraftPath != "" || opt.DraftLayers > 0 {
			rep.Settings.K = opt.K
		}
		switch {
		case eagle3:
			// A head binds to each thread count's target engine.
			sb.eagle3, sb.drafter = opt.DraftPath, "eagle3 "+opt.DraftPath
			rep.Draft = &ModelInfo{Path: opt.DraftPath, Arch: runtime.Eagle3Arch, Layers: 1}
			if fi, err := os.Stat(opt.DraftPath); err == nil && !fi.IsDir() {
				rep.Draft.Bytes = fi.Size()
			}
		case opt.DraftPath != "" && outpath.SameFile(path, opt.DraftPath):
			// The model drafting for itself: the timed engine drafts too,
			// so the file is mapped and held once.
			sb.draft = m
			di := modelInfo(m, opt.DraftPath)
			rep.Draft, sb.drafter = &di, "draft "+opt.DraftPath
		case opt.DraftPath != "":
			if sb.draft, err = model.Open(opt.DraftPath); err != nil {
				return err
			}
			defer sb.draft.Close()
			di := modelInfo(sb.draft, opt.DraftPath)
			rep.Draft, sb.drafter = &di, "draft "+opt.DraftPath
		case opt.DraftLayers > 0:
			if sb.draft, err = TruncatedDraft(m, opt.DraftLayers); err != nil {
				return err
			}
			di := modelInfo(sb.draft, "")
			di.Path = fmt.Sprintf("%s (first %d layers)", path, opt.DraftLayers)
			rep.Draft, sb.drafter = &di, fmt.Sprintf("first %d layers", opt.DraftLayers)
		}
		if sb.plans, err = readSpecPlans(m, opt, sb.draft != nil, sb.eagle3 != ""); err != nil {
			return err
		}
		for _, sp := range sb.plans { // an spd draft proposes draft-len
			need = max(need, len(sb.prompt)+opt.Gen+sp.p.Dialog.DraftLen+1)
		}
		sb.need = need
		if opt.Device != nil && sb.drafter != "" {
			if sb.bytes, err = defaultPlanBytes(m); err != nil {
				return err
			}
		}
	}

	var refs map[int]*reference
	if !opt.NoSanity {
		refs = map[int]*reference{}
		// The untimed reference reads the weights from the file mapping, so
		// the process does not hold a second in-memory copy of the model.
		re, err := runtime.New(m, runtime.Options{Threads: opt.RefThreads, Context: need, Batch: 16, KVF16: opt.KVF16})
		if err != nil {
			return err
		}
		for _, d := range opt.Depths {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			opt.logf("reference: depth %d (%d threads, batch 16, untimed)", d, opt.RefThreads)
			r, err := runReference(ctx, re, cfg, fill[:d], prompt[:opt.Prompt], opt.Gen)
			if err != nil {
				return err
			}
			refs[d] = r
		}
		if opt.speculative() {
			opt.logf("reference: greedy after the speculative prompt (untimed)")
			if sb.want, err = re.Greedy(ctx, sb.prompt, opt.Gen); err != nil {
				return err
			}
		}
	}

	var weights [][]byte // what the probe reads
	for i, th := range opt.Threads {
		e, err := runtime.New(m, runtime.Options{Threads: th, Context: need, Batch: opt.Batch, KVF16: opt.KVF16})
		if err != nil {
			return err
		}
		if i == 0 && opt.ProbeBytes >= 0 {
			// The probe reads the weights the timed engines read, where
			// they are: it costs no memory. It runs right before the
			// timings and again after them, since the machine's bandwidth
			// drifts.
			weights = e.DecodeWeights()
			if rep.Machine.ReadCeiling, err = opt.probe(ctx, "before", weights); err != nil {
				return err
			}
		}
		stop := func() {}
		if opt.Fault != nil {
			stop = opt.Fault.apply(e)
		}
		for _, d := range opt.Depths {
			res, err := measure(ctx, e, opt, th, d, fill[:d], prompt[:opt.Prompt], refs[d])
			rep.Results = append(rep.Results, res...)
			if err != nil {
				stop()
				return err
			}
		}
		if opt.speculative() {
			res, err := sb.run(ctx, e, th)
			if err != nil {
				stop()
				return err
			}
			rep.Speculative = append(rep.Speculative, res...)
		}
		stop()
		if opt.Llama {
			rep.Results = append(rep.Results, opt.runLlama(ctx, llama, path, th, fill, prompt)...)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}

	if len(rep.Machine.ReadCeiling) > 0 {
		after, err := opt.probe(ctx, "after", weights)
		if err != nil {
			return err
		}
		rep.Machine.ReadCeiling = mergeCeilings(rep.Machine.ReadCeiling, after)
		for _, c := range rep.Machine.ReadCeiling {
			opt.logf("memory-read ceiling of %s: %d threads: %.1f GB/s (%s of %d windows by %s; median %.1f, best %.1f; before %.1f, after %.1f; %s)",
				path, c.Threads, c.GBPerSec, c.Statistic, c.Windows, c.Loop, c.Median, c.Best, c.Before, c.After, loopsLabel(c.Loops))
		}
	}
	return nil
}

// probe measures the memory-read ceiling of the weights at every thread
// count, at most Options.ProbeBytes of them when positive; when says
// where in the run.
func (o *Options) probe(ctx context.Context, when string, weights [][]byte) ([]Ceiling, error) {
	cs, err := ReadCeiling(ctx, weights, o.ProbeBytes, o.Threads)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		o.logf("memory-read probe %s the timings: the weights are too small to read (under %d bytes a matrix)", when, probeGrain)
		return nil, nil
	}
	o.logf("memory-read probe %s the timings: %s of the model's weights with %v threads", when, sizeLabel(cs[0].Bytes), o.Threads)
	for _, c := range cs {
		o.logf("memory-read probe %s: %d threads: %.1f GB/s (%s of %d windows by %s; median %.1f, best %.1f; %s)",
			when, c.Threads, c.GBPerSec, c.Statistic, c.Windows, c.Loop, c.Median, c.Best, loopsLabel(c.Loops))
	}
	return cs, nil
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

func runReference(ctx context.Context, e *runtime.Engine, cfg model.Config, fill, prompt []int32, gen int) (*reference, error) {
	base, last, err := prefill(ctx, e, fill)
	if err != nil {
		return nil, err
	}
	r := &reference{}
	if len(prompt) > 0 {
		if r.ppLogits, err = base.Clone().ForwardContext(ctx, prompt); err != nil {
			return nil, err
		}
	}
	if gen > 0 {
		collect()
		if r.tgTokens, r.tgLogits, err = generate(ctx, base.Clone(), firstToken(cfg, last), gen); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func prefill(ctx context.Context, e *runtime.Engine, fill []int32) (*runtime.State, []float32, error) {
	collect()
	st := e.NewState()
	if len(fill) == 0 {
		return st, nil, nil
	}
	l, err := st.ForwardContext(ctx, fill)
	return st, l, err
}

// collect runs a garbage collection before an untimed or timed run, so
// that the run reuses the memory of the States before it rather than the
// heap growing by a State or two (its KV cache and working buffers) until
// the collector's goal: on a small model (the 700M Q1_0, a 95 MiB file)
// that growth was a few MiB of peak RSS, a few percent of the whole. The
// heap holds no weights (they are the file's mapping), so a collection
// takes well under a millisecond, and none runs inside a timing.
func collect() { goruntime.GC() }

// generate runs n single-token steps from tok: the tg test. It stops
// between steps once ctx is done.
func generate(ctx context.Context, st *runtime.State, tok int32, n int) ([]int32, []float32, error) {
	out := make([]int32, 0, n)
	var l []float32
	var err error
	for range n {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
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
	base, last, err := prefill(ctx, e, fill)
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
			collect()
			st := base.Clone()
			t0 := time.Now()
			// ForwardContext checks ctx between the runtime's batches (32
			// tokens by default): a nanosecond each, and an interrupt stops
			// a long prompt within a batch.
			logits, err := st.ForwardContext(ctx, prompt)
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
			collect()
			st := base.Clone()
			t0 := time.Now()
			toks, logits, err := generate(ctx, st, first, opt.Gen)
			dt := time.Since(t0).Seconds()
			if err != nil {
				return out, err // the pp row stands
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

// DefaultSpecText is the text speculative runs continue when the model
// has a tokenizer and Options.SpecText is empty.
const DefaultSpecText = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her"

// specPrompt returns the ids the speculative runs continue and what they
// are: text tokenized with the model's tokenizer (text, or
// DefaultSpecText when the model has one), else the random ids.
func specPrompt(m *model.Model, path, text string, random []int32) ([]int32, string, error) {
	tok, err := tokenizer.ForModel(m, path)
	if err != nil {
		if text != "" {
			return nil, "", fmt.Errorf("bench: the speculative text needs %s's tokenizer: %w", path, err)
		}
		return random, fmt.Sprintf("%d random ids", len(random)), nil
	}
	if text == "" {
		text = DefaultSpecText
	}
	ids := tok.Encode(text, true)
	if len(ids) == 0 {
		return nil, "", fmt.Errorf("bench: speculative text %q encodes to no tokens", text)
	}
	return ids, "text: " + text, nil
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
