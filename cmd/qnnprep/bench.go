package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/qnnprep/qnnprep/bench"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/qnnpack"
)

var benchCmd = &command{
	Name:    "bench",
	Usage:   "qnnprep bench MODEL... [-p 512] [-n 128] [-d 0,2048] [-r 3] [-t 1,2] [--draft D | --draft-layers N] [-k 1,2,4] [--plan P.json,... [--forecast-embeddings F]] [--device DEV.json] [--llama [--llama-peer auto|llama-bench|node] [--llama-timeout 10m] [--llama-cpu haswell]] [--read-probe all|MiB] [-o table|json|csv] [--plot FILE.svg|png]\n       qnnprep bench convert SOURCE... --recipe q1[,q8_0] [-o table|json|csv]\n       qnnprep bench report RESULT.json... [-o table|json|csv] [--plot FILE.svg|png]",
	Summary: "measure prompt and generation speed by depth (with a sanity check of every run), speculative speed-up, llama.cpp beside it, and conversion throughput",
	Run:     runBench,
}

func runBench(ctx context.Context, c *command, args []string) error {
	if len(args) > 0 && args[0] == "convert" {
		return benchConvert(ctx, c, args[1:])
	}
	if len(args) > 0 && args[0] == "report" {
		return benchReport(c, args[1:])
	}
	fs := newFlags(c)
	p := fs.IntP("prompt", "p", 512, "prompt tokens per pp test (0: no pp)")
	n := fs.IntP("gen", "n", 128, "generated tokens per tg test (0: no tg)")
	depths := fs.IntSliceP("depth", "d", []int{0}, "context tokens filled before each test (comma list)")
	reps := fs.IntP("reps", "r", 3, "timed repetitions after one warm-up")
	threads := fs.IntSliceP("threads", "t", []int{2}, "thread counts (comma list)")
	batch := fs.Int("batch", 0, "prompt batch size (runtime Options.Batch; 0: default)")
	kvf16 := fs.Bool("kv-f16", false, "llama.cpp's F16 KV / flash-attention arithmetic")
	draft := fs.String("draft", "", "draft model (same vocabulary) or EAGLE-3 head (GGUF or HF directory) for speculative decoding")
	draftLayers := fs.Int("draft-layers", 0, "use the target's first N layers as the draft")
	ks := fs.IntSliceP("k", "k", []int{1, 2, 4}, "draft tokens per window (comma list)")
	specDepth := fs.Int("spec-depth", 0, "context filled before the speculative runs (default: the first depth)")
	specText := fs.String("spec-text", "", "text the speculative runs continue, tokenized with the model's tokenizer (default: a short story opening when the model has a tokenizer, else random ids)")
	plans := fs.StringSlice("plan", nil, "also measure these plans' speculative dialogs through the staged runtime (comma list): spd drafts with a --draft model or --draft-layers, ssd-q1 with --forecast-embeddings, eaglet with the --draft EAGLE-3 head")
	forecast := fs.String("forecast-embeddings", "", "the ssd-q1 plan's forecast-token embeddings (safetensors or GGUF, as build takes them)")
	device := fs.String("device", "", "device profile JSON (as estimate takes it): every speculative row gets the device tokens/s estimate predicts from its acceptance")
	llama := fs.Bool("llama", false, "also time llama.cpp on the same file (llama-bench, else node-llama-cpp)")
	llamaPeer := fs.String("llama-peer", "auto", "with --llama: auto (llama-bench if built, else node-llama-cpp), llama-bench or node")
	llamaCPU := fs.String("llama-cpu", "", "with --llama-peer llama-bench: the only ggml CPU backend variant llama.cpp may load (haswell: AVX2 without AVX-512; default: the best this CPU supports)")
	llamaTimeout := fs.Duration("llama-timeout", peers.Timeout, "with --llama: longest llama.cpp run (one depth and thread count); a run that fails or times out is reported as such and the rest still written")
	format := fs.StringP("output", "o", "table", "output format: table, json or csv")
	plotPath := fs.String("plot", "", "write a plot: FILE.svg or FILE.png")
	noSanity := fs.Bool("no-sanity", false, "skip the untimed reference runs")
	refThreads := fs.Int("ref-threads", 1, "threads of the reference engine")
	tol := fs.Float64("tolerance", 0, "largest |Δlogit| against the reference still sane")
	seed := fs.Uint64("seed", 1, "seed of the token ids")
	fault := fs.String("fault", "", "break a kernel on purpose: TENSOR=SCALE (testing the sanity check)")
	probe := fs.String("read-probe", "all", "how much of each model's weights the memory-read probe streams at each thread count: all, or at most this many MiB (decode rows show their fraction of its GB/s; 0: no probe)")
	quiet := fs.BoolP("quiet", "q", false, "no progress on stderr")
	_ = fs.MarkHidden("fault")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return usageError("want at least one MODEL")
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	var specIn []string
	for _, f := range append(*plans, *forecast, *device) {
		if f != "" {
			specIn = append(specIn, f)
		}
	}
	if err := checkPaths(ins(fs.Args(), modelInput(*draft), specIn), []string{*plotPath}, nil); err != nil {
		return err
	}
	opt := bench.Options{
		Prompt: *p, Gen: *n, Depths: *depths, Reps: *reps, Threads: *threads, Batch: *batch, KVF16: *kvf16,
		DraftPath: *draft, DraftLayers: *draftLayers, K: *ks, SpecDepth: *specDepth, SpecText: *specText, Llama: *llama,
		NoSanity: *noSanity, RefThreads: *refThreads, Tolerance: *tol, Seed: *seed,
		Plans: *plans, ForecastPath: *forecast,
	}
	if *device != "" {
		d, err := qnnpack.ReadDevice(*device)
		if err != nil {
			return err
		}
		opt.Device = &d
	}
	switch *llamaPeer {
	case bench.LlamaPeerAuto, bench.LlamaPeerBench, bench.LlamaPeerNode:
		opt.LlamaPeer = *llamaPeer
	default:
		return usageError("--llama-peer %q: want auto, llama-bench or node", *llamaPeer)
	}
	if *llamaTimeout <= 0 {
		return usageError("--llama-timeout %v: want a positive duration", *llamaTimeout)
	}
	opt.LlamaTimeout = *llamaTimeout
	if *llamaCPU != "" && (!*llama || *llamaPeer != bench.LlamaPeerBench) {
		return usageError("--llama-cpu %s: needs --llama --llama-peer llama-bench", *llamaCPU)
	}
	opt.LlamaCPU = *llamaCPU
	if *reps < 1 || *refThreads < 1 {
		return usageError("-r %d, --ref-threads %d: want at least 1", *reps, *refThreads)
	}
	pb, err := probeBytes(*probe)
	if err != nil {
		return err
	}
	opt.ProbeBytes = pb
	if *fault != "" {
		f, err := bench.ParseFault(*fault)
		if err != nil {
			return usageError("--fault: %v", err)
		}
		opt.Fault = f
	}
	if !*quiet {
		opt.Log = os.Stderr
	}
	s, err := bench.RunAll(ctx, fs.Args(), opt)
	if err != nil {
		return err
	}
	if err := s.Write(os.Stdout, *format); err != nil {
		return err
	}
	if *plotPath != "" {
		if err := bench.WritePlot(*plotPath, s); err != nil {
			return err
		}
	}
	code := 0
	if bad := s.Failed(); len(bad) > 0 {
		rest := ""
		if len(bad) < len(s.Reports) {
			rest = "; the others' reports are complete"
		}
		fmt.Fprintf(os.Stderr, "qnnprep bench: %d of %d models failed (first: %s: %s)%s\n",
			len(bad), len(s.Reports), bad[0].Model.Path, bad[0].Error, rest)
		code = 1
	}
	if bad := s.Insane(); len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "qnnprep bench: %s: a timed run disagreed with its reference (sanity column)\n", bad[0].Model.Path)
		code = 1
	}
	if bad := s.PeerFailures(); len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "qnnprep bench: llama.cpp gave no timings for %d rows (first: %s depth %d, %d threads: %s)\n",
			len(bad), bad[0].Test, bad[0].Depth, bad[0].Threads, bad[0].ErrorLine())
		code = 1
	}
	if code != 0 {
		return exitError{code}
	}
	return nil
}

// probeBytes is Options.ProbeBytes for --read-probe: "all" (0), MiB, or
// "0" (none: -1).
func probeBytes(v string) (int64, error) {
	if v == "all" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil || n < 0 || n > 1<<40:
		return 0, usageError("--read-probe %q: want all, MiB, or 0 for none", v)
	case n == 0:
		return -1, nil
	}
	return n << 20, nil
}

func checkFormat(f string) error {
	switch f {
	case bench.FormatTable, bench.FormatJSON, bench.FormatCSV:
		return nil
	}
	return usageError("-o %q: want table, json or csv", f)
}

func benchConvert(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	recipes := fs.StringSlice("recipe", nil, "recipes to time (comma list: q1, q8_0, int8, f16, bf16, keep)")
	workers := fs.IntP("threads", "t", 0, "quantize workers (0: all CPUs)")
	dir := fs.String("dir", "", "directory the outputs are written to and deleted from (default: the temp dir)")
	scratch := fs.String("scratch", "", "directory of the compute-only pass (default: /dev/shm)")
	format := fs.StringP("output", "o", "table", "output format: table, json or csv")
	quiet := fs.BoolP("quiet", "q", false, "no progress on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return usageError("bench convert: want at least one SOURCE")
	}
	if len(*recipes) == 0 {
		return usageError("bench convert: --recipe is required")
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	o := bench.ConvertOptions{Workers: *workers, Dir: *dir, Scratch: *scratch}
	if !*quiet {
		o.Log = os.Stderr
	}
	s, err := bench.ConvertAll(ctx, fs.Args(), *recipes, o)
	if err != nil {
		return err
	}
	return s.Write(os.Stdout, *format)
}

// benchReport merges saved -o json outputs and prints or plots them.
func benchReport(c *command, args []string) error {
	fs := newFlags(c)
	format := fs.StringP("output", "o", "table", "output format: table, json or csv")
	plotPath := fs.String("plot", "", "write a plot: FILE.svg or FILE.png")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return usageError("bench report: want at least one RESULT.json")
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	if err := checkPaths(fs.Args(), []string{*plotPath}, nil); err != nil {
		return err
	}
	s, err := bench.ReadSuites(fs.Args()...)
	if err != nil {
		return err
	}
	if err := s.Write(os.Stdout, *format); err != nil {
		return err
	}
	if *plotPath != "" {
		return bench.WritePlot(*plotPath, s)
	}
	return nil
}
