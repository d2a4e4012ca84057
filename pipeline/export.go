package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// ExportOptions say what Export writes (qnnprep export onnx).
type ExportOptions struct {
	Plan   string // plan.json
	Model  string // the model the plan was made for
	OutDir string
	ONNX   onnx.ExportOptions
	// Ranges is a ranges file (onnx.ReadCalibration) whose groups win
	// over calibrated ones.
	Ranges string
	// Force exports a plan that breaks Genie's contract.
	Force bool
	// Calibration, if set, takes activation ranges (Calibrate) and writes
	// them to OutDir/ranges.json. A text calibration without a Tokenizer
	// uses the model's.
	Calibration *CalibOptions

	Log      io.Writer                    // the calibration's summary line; may be nil
	Progress func(i, n int, graph string) // each graph as its export starts; may be nil
}

// Exported is what Export wrote.
type Exported struct {
	Paths  []string
	Bytes  int64 // of the files in Paths
	Graphs int   // graphs in the plan
}

// Export writes every graph of o.Plan for o.Model as ONNX with its QNN
// encodings into o.OutDir (onnx.ExportContext), after checking the plan
// against Genie's contract and the model (its shapes, and its stage sizes:
// a plan made for other weights is refused), with activation ranges from
// o.Ranges and the calibration.
func Export(ctx context.Context, o ExportOptions) (*Exported, error) {
	p, err := shard.ReadPlan(o.Plan)
	if err != nil {
		return nil, err
	}
	if vs := shard.Check(p, shard.CheckEnv{}); len(vs) > 0 && !o.Force {
		return nil, fmt.Errorf("%s: %d Genie contract violation(s), first: %s — run `qnnprep check %s`, or --force", o.Plan, len(vs), vs[0], o.Plan)
	}
	opts := o.ONNX
	if o.Ranges != "" {
		c, err := onnx.ReadCalibration(o.Ranges)
		if err != nil {
			return nil, err
		}
		opts.Ranges = c.Ranges
	}
	m, err := model.Open(o.Model)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if err := p.Fits(m.Config); err != nil {
		return nil, fmt.Errorf("%s does not describe %s: %w", o.Plan, o.Model, err)
	}
	if err := p.SizedFor(m); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Plan, err)
	}
	if co := o.Calibration; co != nil {
		if co.Text != "" && co.Tokenizer == nil {
			if co.Tokenizer, err = tokenizer.ForModel(m, o.Model); err != nil {
				return nil, fmt.Errorf("--calib-text: %s's tokenizer: %w", o.Model, err)
			}
		}
		cal, err := Calibrate(ctx, m, p, *co)
		if err != nil {
			return nil, err
		}
		// The ranges file goes beside the graphs it made.
		rpath := filepath.Join(o.OutDir, RangesName)
		if err := atomicfile.Claim(o.OutDir, RangesName); err != nil {
			return nil, err
		}
		if err := cal.Write(rpath); err != nil {
			return nil, err
		}
		if opts.Ranges == nil {
			opts.Ranges = map[string]onnx.Range{}
		}
		for k, v := range cal.Ranges {
			if _, given := opts.Ranges[k]; !given { // o.Ranges win
				opts.Ranges[k] = v
			}
		}
		if o.Log != nil {
			fmt.Fprintf(o.Log, "calibrated %d groups on %d tokens (%s, %s) → %s\n", len(cal.Ranges), cal.Settings.Tokens, cal.Settings.Source, cal.Settings.Stat, rpath)
		}
	}
	paths, err := onnx.ExportContext(ctx, m, p, o.OutDir, opts, o.Progress)
	if err != nil {
		return nil, err
	}
	x := &Exported{Paths: paths, Graphs: len(p.Graphs)}
	for _, path := range paths {
		if st, err := os.Stat(path); err == nil {
			x.Bytes += st.Size()
		}
	}
	return x, nil
}
