package onnx

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

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
// <graph>.onnx and <graph>.encodings.json per graph and, when the weights
// are external, one data file per stage, StageDataName, that the stage's
// AR/CL variants share: each weight is stored there once and every
// variant's model references it by offset and length. Weights are
// external when ExportOptions.External is set, when a stage has more than
// one graph, or when a graph's weights pass MaxInline.
//
// A stage's files appear under their names together, only when all are
// complete; the same inputs give byte-identical files. progress, if set,
// is called before each graph. It returns the paths written.
//
// dir is qnnprep's (atomicfile.Claim): Export refuses a directory holding
// files it did not write, and records each stage's files there before
// writing them.
func Export(m *model.Model, p *shard.Plan, dir string, opts ExportOptions, progress func(i, n int, graph string)) ([]string, error) {
	return ExportContext(context.Background(), m, p, dir, opts, progress)
}

// StageDataName is the name of the external data file stage index
// (0-based) of p shares between its graphs: {model}_{NN}_of_{MM}.data,
// zero-padded like the graph names.
func StageDataName(p *shard.Plan, index int) string {
	g := shard.GraphName(p.Model.Name, 1, 1, index, len(p.Stages))
	return p.Model.Name + strings.TrimPrefix(g, p.Model.Name+"_ar1_cl1") + ".data"
}

// ExportContext is Export that stops once ctx is cancelled, returning
// ctx.Err(): between graphs and, while writing, between tensors and within
// large ones. Files of stages already written stay; none is left partial.
//
// Every graph of a stage p.Graphs holds is written together; p must hold
// all of the stage's graphs (shard.Stage.Graphs), since they share a data
// file that one of them alone would overwrite.
func ExportContext(ctx context.Context, m *model.Model, p *shard.Plan, dir string, opts ExportOptions, progress func(i, n int, graph string)) ([]string, error) {
	if err := atomicfile.Claim(dir); err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	byStage := map[int][]int{}
	var order []int
	for i := range p.Graphs {
		s := p.Graphs[i].Stage
		if s < 0 || s >= len(p.Stages) {
			return nil, fmt.Errorf("onnx: graph %s: stage %d not in the plan", p.Graphs[i].Name, s)
		}
		if byStage[s] == nil {
			order = append(order, s)
		}
		byStage[s] = append(byStage[s], i)
	}
	for _, s := range order {
		if len(byStage[s]) != len(p.Stages[s].Graphs) {
			return nil, fmt.Errorf("onnx: stage %d: %d of its %d graphs given; its graphs share one data file and are exported together", s+1, len(byStage[s]), len(p.Stages[s].Graphs))
		}
	}
	var paths []string
	done := 0
	for _, s := range order {
		if err := ctx.Err(); err != nil {
			return paths, err
		}
		out, err := exportStage(ctx, m, p, s, byStage[s], dir, opts, func(g string) {
			if progress != nil {
				progress(done, len(p.Graphs), g)
			}
			done++
		})
		if err != nil {
			return paths, err
		}
		paths = append(paths, out...)
	}
	return paths, nil
}

// exportStage writes the graphs gi of stage s (indices into p.Graphs).
func exportStage(ctx context.Context, m *model.Model, p *shard.Plan, s int, gi []int, dir string, opts ExportOptions, progress func(graph string)) ([]string, error) {
	var graphs []*shard.Graph
	for _, i := range gi {
		graphs = append(graphs, &p.Graphs[i])
	}
	return exportGraphs(ctx, p, graphs, StageDataName(p, s), dir, opts, progress, func(pg *shard.Graph, o Options) (*Graph, *Encodings, error) {
		return BuildStage(m, p, pg, o)
	})
}

// DraftDataName is the external data file the eaglet draft graphs share.
func DraftDataName(p *shard.Plan) string { return p.Draft.Name + "_01_of_01.data" }

// ExportDraft writes the eaglet draft graphs of p (p.Draft) for the head in
// opts.Eagle3 into dir, like Export writes a stage: <graph>.onnx and
// <graph>.encodings.json per graph, and DraftDataName when the weights are
// external. It returns the paths written.
func ExportDraft(ctx context.Context, p *shard.Plan, dir string, opts ExportOptions, progress func(graph string)) ([]string, error) {
	if p.Draft == nil {
		return nil, fmt.Errorf("onnx: plan %s has no eaglet draft", p.Model.Name)
	}
	if err := atomicfile.Claim(dir); err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	if progress == nil {
		progress = func(string) {}
	}
	var graphs []*shard.Graph
	for i := range p.Draft.Graphs {
		graphs = append(graphs, &p.Draft.Graphs[i])
	}
	return exportGraphs(ctx, p, graphs, DraftDataName(p), dir, opts, progress, func(dg *shard.Graph, o Options) (*Graph, *Encodings, error) {
		return BuildDraft(p, dg, o)
	})
}

// exportGraphs builds and writes graphs that share one data file.
func exportGraphs(ctx context.Context, p *shard.Plan, graphs []*shard.Graph, dataName, dir string, opts ExportOptions, progress func(graph string),
	build func(*shard.Graph, Options) (*Graph, *Encodings, error)) ([]string, error) {
	names := []string{dataName}
	for _, g := range graphs {
		names = append(names, g.Name+".onnx", g.Name+".onnx.data", g.Name+".encodings.json")
	}
	if err := atomicfile.Claim(dir, names...); err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	external := opts.External || len(graphs) > 1
	opts.params = map[*model.Tensor]*Encoding{}
	var gs []*Graph
	var encs []*Encodings
	var paths []string
	var wos []WriteOptions
	for _, pg := range graphs {
		progress(pg.Name)
		g, enc, err := build(pg, opts.Options)
		if err != nil {
			return nil, err
		}
		external = external || g.InitBytes() > MaxInline
		gs, encs = append(gs, g), append(encs, enc)
		paths = append(paths, filepath.Join(dir, pg.Name+".onnx"))
		wos = append(wos, WriteOptions{
			IRVersion: opts.IRVersion, Opset: opts.Opset,
			Producer: opts.Producer, Version: opts.Version,
			Metadata: [][2]string{
				{"qnnprep.graph", pg.Name},
				{"qnnprep.stage", strconv.Itoa(pg.Stage)},
				{"qnnprep.ar", strconv.Itoa(pg.AR)},
				{"qnnprep.cl", strconv.Itoa(pg.CL)},
				{"qnnprep.model", p.Model.Name},
			},
		})
	}
	dataPath := filepath.Join(dir, dataName)
	var side []sideFile
	var out []string
	for i, path := range paths {
		enc := strings.TrimSuffix(path, ".onnx") + ".encodings.json"
		side = append(side, sideFile{enc, encs[i].Write})
		out = append(out, path, enc)
	}
	if err := writeModels(ctx, gs, paths, wos, dataPath, external, side); err != nil {
		return nil, err
	}
	if external {
		out = append(out, dataPath)
	}
	return out, nil
}
