package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/pipeline"
)

var exportCmd = &command{
	Name:    "export",
	Usage:   "qnnprep export onnx PLAN MODEL OUTDIR [--opset 17] [--ir 8] [--external] [--ranges FILE] [--calib-text FILE [--calib-split lines|windows] [--calib-samples N] [--calib-len L] | --calibrate N] [--calib-stat minmax|pNN.N]",
	Summary: "write every stage of a plan as an ONNX model with its QNN encodings JSON",
	Run:     runExport,
}

func runExport(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	opset := fs.Int64("opset", 17, "ONNX opset (17 is the newest Debian's onnx 1.12 checker knows)")
	ir := fs.Int64("ir", 8, "ONNX IR version (raised to what a newer --opset needs unless given)")
	external := fs.Bool("external", false, "weights in the stage's shared data file even for a single-graph stage under 2 GiB (always with several AR/CL variants, or above 2 GiB)")
	ranges := fs.String("ranges", "", `activation ranges by encoding group: a ranges file an earlier calibration wrote (ranges.json), or {"past_key_3": [-8.5, 9.1], …}; its groups win over calibrated ones`)
	calibrate := fs.Int("calibrate", 0, "derive activation ranges (hidden states, KV, conv and SSM state, logits) by decoding this many tokens greedily with the bundled runtime")
	calibIDs := fs.IntSlice("calib-ids", nil, "token ids the calibration decode starts from (default: the model's BOS)")
	calib := addCalibFlags(fs)
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
	co, err := calib()
	if err != nil {
		return err
	}
	if co.Text != "" && *calibrate > 0 {
		return usageError("give --calib-text or --calibrate, not both")
	}
	if co.Text == "" && fs.Changed("calib-stat") && *calibrate == 0 {
		return usageError("--calib-stat needs --calib-text or --calibrate")
	}
	planPath, modelPath, out := fs.Arg(1), fs.Arg(2), fs.Arg(3)
	if err := checkPaths(ins(modelInput(modelPath), []string{planPath, *ranges, co.Text}), nil, []string{out}); err != nil {
		return err
	}
	o := pipeline.ExportOptions{Plan: planPath, Model: modelPath, OutDir: out, ONNX: opts, Ranges: *ranges, Force: *force}
	if *calibrate > 0 || co.Text != "" {
		co.Greedy = *calibrate
		for _, id := range *calibIDs {
			co.Start = append(co.Start, int32(id))
		}
		o.Calibration = &co
	}
	if !*quiet {
		o.Log = os.Stderr
		o.Progress = func(i, n int, graph string) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "[%d/%d] %s\n", i+1, n, graph)
			}
		}
	}
	x, err := pipeline.Export(ctx, o)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %d files (%s) for %d graphs in %s\n", len(x.Paths), bytesize.Format(x.Bytes), x.Graphs, out)
	return nil
}

// addCalibFlags adds the text-calibration flags export and build share;
// the returned function checks them and gives the options (Text empty
// without --calib-text).
func addCalibFlags(fs *pflag.FlagSet) func() (pipeline.CalibOptions, error) {
	text := fs.String("calib-text", "", "calibrate activation ranges on this text, tokenized with the model's tokenizer (see --calib-split)")
	split := fs.String("calib-split", pipeline.SplitLines, "with --calib-text: lines (one sample per non-empty line) or windows (the whole text cut into windows of --calib-len tokens)")
	samples := fs.Int("calib-samples", 16, "with --calib-text: samples used, spread evenly over the text")
	length := fs.Int("calib-len", 128, "with --calib-text: tokens per sample at most, BOS included")
	stat := fs.String("calib-stat", "minmax", "range statistic per encoding group: minmax, or pNN.N (50 < NN.N < 100) to clip each tail at that percentile (e.g. p99.99)")
	return func() (pipeline.CalibOptions, error) {
		st, err := onnx.ParseStat(*stat)
		if err != nil {
			return pipeline.CalibOptions{}, usageError("--calib-stat: %v", err)
		}
		o := pipeline.CalibOptions{Text: *text, Split: *split, Samples: *samples, Len: *length, Stat: st}
		if *text == "" {
			for _, f := range []string{"calib-split", "calib-samples", "calib-len"} {
				if fs.Changed(f) {
					return o, usageError("--%s needs --calib-text", f)
				}
			}
			return o, nil
		}
		if *split != pipeline.SplitLines && *split != pipeline.SplitWindows {
			return o, usageError("--calib-split %q: want %s or %s", *split, pipeline.SplitLines, pipeline.SplitWindows)
		}
		if *samples < 1 || *length < 2 {
			return o, usageError("--calib-samples %d --calib-len %d: want at least 1 sample of 2 tokens", *samples, *length)
		}
		return o, nil
	}
}
