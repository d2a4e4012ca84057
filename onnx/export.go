package onnx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// ExportOptions control Export.
type ExportOptions struct {
	Options
	IRVersion int64 // 0 means 8
	// External forces initializers into NAME.onnx.data even below 2 GiB.
	External bool
	Producer string // producer_name, e.g. "qnnprep"
	Version  string // producer_version
}

// Export writes every graph of plan p for model m into dir:
// <graph>.onnx (with <graph>.onnx.data when the weights are external) and
// <graph>.encodings.json. Each file appears under its name only when
// complete; the same inputs give byte-identical files. progress, if set,
// is called before each graph. It returns the paths written.
//
// dir is qnnprep's (atomicfile.Claim): Export refuses a directory holding
// files it did not write, and records each graph's files there before
// writing them.
func Export(m *model.Model, p *shard.Plan, dir string, opts ExportOptions, progress func(i, n int, graph string)) ([]string, error) {
	return ExportContext(context.Background(), m, p, dir, opts, progress)
}

// ExportContext is Export that stops once ctx is cancelled, returning
// ctx.Err(): between graphs and, while writing, between tensors and within
// large ones. Files of graphs already written stay; none is left partial.
func ExportContext(ctx context.Context, m *model.Model, p *shard.Plan, dir string, opts ExportOptions, progress func(i, n int, graph string)) ([]string, error) {
	if err := atomicfile.Claim(dir); err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	var paths []string
	for i := range p.Graphs {
		if err := ctx.Err(); err != nil {
			return paths, err
		}
		pg := &p.Graphs[i]
		if progress != nil {
			progress(i, len(p.Graphs), pg.Name)
		}
		if err := atomicfile.Claim(dir, pg.Name+".onnx", pg.Name+".onnx.data", pg.Name+".encodings.json"); err != nil {
			return paths, fmt.Errorf("onnx: %w", err)
		}
		g, enc, err := BuildStage(m, p, pg, opts.Options)
		if err != nil {
			return paths, err
		}
		base := filepath.Join(dir, pg.Name)
		wo := WriteOptions{
			IRVersion: opts.IRVersion, Opset: opts.Opset, External: opts.External,
			Producer: opts.Producer, Version: opts.Version,
			Metadata: [][2]string{
				{"qnnprep.graph", pg.Name},
				{"qnnprep.stage", strconv.Itoa(pg.Stage)},
				{"qnnprep.ar", strconv.Itoa(pg.AR)},
				{"qnnprep.cl", strconv.Itoa(pg.CL)},
				{"qnnprep.model", p.Model.Name},
			},
		}
		if err := g.WriteFileContext(ctx, base+".onnx", wo); err != nil {
			return paths, err
		}
		paths = append(paths, base+".onnx")
		if _, err := os.Stat(base + ".onnx.data"); err == nil {
			paths = append(paths, base+".onnx.data")
		}
		if err := enc.WriteFile(base + ".encodings.json"); err != nil {
			return paths, err
		}
		paths = append(paths, base+".encodings.json")
	}
	return paths, nil
}
