package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

var exportCmd = &command{
	Name:    "export",
	Usage:   "qnnprep export onnx PLAN MODEL OUTDIR [--opset 17] [--ir 8] [--external] [--ranges FILE]",
	Summary: "write every stage of a plan as an ONNX model with its QNN encodings JSON",
	Run:     runExport,
}

func runExport(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	opset := fs.Int64("opset", 17, "ONNX opset (17 is the newest Debian's onnx 1.12 checker knows)")
	ir := fs.Int64("ir", 8, "ONNX IR version (raised to what a newer --opset needs unless given)")
	external := fs.Bool("external", false, "weights in the stage's shared data file even for a single-graph stage under 2 GiB (always with several AR/CL variants, or above 2 GiB)")
	ranges := fs.String("ranges", "", `JSON file of calibrated activation ranges by encoding group, {"past_key_3": [-8.5, 9.1], …}`)
	calibrate := fs.Int("calibrate", 0, "derive activation ranges (hidden states, KV, conv state, logits) by decoding this many tokens greedily with the bundled runtime")
	calibIDs := fs.IntSlice("calib-ids", nil, "token ids the calibration decode starts from (default: the model's BOS)")
	force := fs.Bool("force", false, "export even if the plan violates the Genie contract")
	quiet := fs.BoolP("quiet", "q", false, "no per-graph progress lines")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 4 || fs.Arg(0) != "onnx" {
		return usageError("want: export onnx PLAN MODEL OUTDIR")
	}
	if *opset < 17 {
		return usageError("--opset %d: the graphs need opset 17 or newer", *opset)
	}
	// The IR version each opset arrived with (onnx/onnx docs/Versioning.md).
	minIR := map[int64]int64{17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 11}
	if need, ok := minIR[*opset]; !ok && *opset > 24 {
		if !fs.Changed("ir") {
			return usageError("--opset %d: give --ir as well", *opset)
		}
	} else if *ir < need {
		if fs.Changed("ir") {
			return usageError("--ir %d: opset %d needs IR %d or newer", *ir, *opset, need)
		}
		*ir = need
	}
	// Q1_0/Q2_0 codes go in the container the plan was sized for
	// (qnnprep plan --container).
	opts := onnx.ExportOptions{
		Options:   onnx.Options{Opset: *opset},
		IRVersion: *ir, External: *external,
		Producer: "qnnprep", Version: qnnprepVersion(),
	}
	planPath, modelPath, out := fs.Arg(1), fs.Arg(2), fs.Arg(3)
	if err := checkPaths(ins(modelInput(modelPath), []string{planPath, *ranges}), nil, []string{out}); err != nil {
		return err
	}
	p, err := shard.ReadPlan(planPath)
	if err != nil {
		return err
	}
	if vs := shard.Check(p, shard.CheckEnv{}); len(vs) > 0 && !*force {
		return fmt.Errorf("%s: %d Genie contract violation(s), first: %s — run `qnnprep check %s`, or --force", planPath, len(vs), vs[0], planPath)
	}
	if *ranges != "" {
		if opts.Ranges, err = readRanges(*ranges); err != nil {
			return err
		}
	}
	m, err := model.Open(modelPath)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := p.Fits(m.Config); err != nil {
		return fmt.Errorf("%s does not describe %s: %w", planPath, modelPath, err)
	}
	if *calibrate > 0 {
		start := make([]int32, len(*calibIDs))
		for i, id := range *calibIDs {
			start[i] = int32(id)
		}
		r, err := calibrateRanges(ctx, m, p, start, *calibrate)
		if err != nil {
			return err
		}
		if opts.Ranges == nil {
			opts.Ranges = map[string]onnx.Range{}
		}
		for k, v := range r {
			if _, given := opts.Ranges[k]; !given { // --ranges wins
				opts.Ranges[k] = v
			}
		}
	}
	var progress func(i, n int, graph string)
	if !*quiet {
		progress = func(i, n int, graph string) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "[%d/%d] %s\n", i+1, n, graph)
			}
		}
	}
	paths, err := onnx.ExportContext(ctx, m, p, out, opts, progress)
	if err != nil {
		return err
	}
	var total int64
	for _, path := range paths {
		if st, err := os.Stat(path); err == nil {
			total += st.Size()
		}
	}
	fmt.Printf("wrote %d files (%s) for %d graphs in %s\n", len(paths), bytesize.Format(total), len(p.Graphs), out)
	return nil
}

// readRanges reads {"group": [min, max], …}.
func readRanges(path string) (map[string]onnx.Range, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string][]float32
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	out := map[string]onnx.Range{}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := raw[k]
		if len(v) != 2 || !(v[0] <= v[1]) || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%s: group %q: want [min, max] with min ≤ max, got %v", path, k, v)
		}
		out[k] = onnx.Range{Min: v[0], Max: v[1]}
	}
	return out, nil
}

// calibrateRanges decodes n tokens greedily after start (the BOS when
// empty), one token per call stage by stage as the plan cuts the model,
// and returns the range every encoding group took: each stage's hidden
// state output, logits and last_hidden_states, and per layer the keys and
// values entering the cache (past_key_L, past_value_L) and the conv state
// (past_conv_L). One range per group makes a state's _in and _out share
// one encoding, as Genie requires.
func calibrateRanges(ctx context.Context, m *model.Model, p *shard.Plan, start []int32, n int) (map[string]onnx.Range, error) {
	e, err := runtime.New(m, runtime.Options{})
	if err != nil {
		return nil, err
	}
	if len(start) == 0 {
		bos := int32(max(m.Config.BOS, 0))
		start = []int32{bos}
	}
	if len(start)+n > e.ContextLength() {
		return nil, fmt.Errorf("calibration: %d tokens exceed the context length %d", len(start)+n, e.ContextLength())
	}
	r := map[string]onnx.Range{}
	add := func(group string, v []float32) {
		if len(v) == 0 {
			return
		}
		cur, ok := r[group]
		if !ok {
			cur = onnx.Range{Min: v[0], Max: v[0]}
		}
		for _, x := range v {
			cur.Min, cur.Max = min(cur.Min, x), max(cur.Max, x)
		}
		r[group] = cur
	}
	st := e.NewState()
	c := m.Config
	kvDim := c.KVHeads * c.HeadDim
	x := make([]float32, c.Hidden)
	logits := make([]float32, c.VocabSize)
	tok := start[0]
	for i := 0; i < len(start)+n-1; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if i < len(start) {
			tok = start[i]
		}
		if err := e.Embed([]int32{tok}, x); err != nil {
			return nil, err
		}
		for _, s := range p.Stages {
			if err := st.RunLayers(s.FirstLayer, s.LastLayer+1, x, nil, nil); err != nil {
				return nil, err
			}
			for l := s.FirstLayer; l <= s.LastLayer; l++ {
				if c.LayerKinds[l] == model.DeltaNet {
					conv, _ := st.DeltaNet(l)
					add(fmt.Sprintf("past_conv_%d", l), conv)
					continue
				}
				k, v := st.KV(l)
				last := len(k) - kvDim
				add(fmt.Sprintf("past_key_%d", l), k[last:])
				add(fmt.Sprintf("past_value_%d", l), v[last:])
			}
			if !s.Head {
				add(shard.HiddenStates(s.Index), x)
				continue
			}
			add(shard.LastHiddenStates, x)
			if err := st.Head(x, logits); err != nil {
				return nil, err
			}
			add(shard.Logits, logits)
		}
		if i >= len(start)-1 {
			tok = runtime.Argmax(logits)
		}
	}
	return r, nil
}
