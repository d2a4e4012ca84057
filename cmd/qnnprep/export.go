package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/shard"
)

func init() {
	c := &command{
		Name:    "export",
		Usage:   "qnnprep export onnx PLAN MODEL OUTDIR [--opset 17] [--ir 8] [--container 4bit|8bit] [--external] [--ranges FILE]",
		Summary: "write every stage of a plan as an ONNX model with its QNN encodings JSON",
	}
	c.Run = func(ctx context.Context, args []string) error {
		fs := newFlags(c)
		opset := fs.Int64("opset", 17, "ONNX opset (17 is the newest Debian's onnx 1.12 checker knows)")
		ir := fs.Int64("ir", 8, "ONNX IR version")
		container := fs.String("container", "4bit", "integer width Q1_0/Q2_0 codes are declared in: 4bit or 8bit")
		external := fs.Bool("external", false, "weights in <graph>.onnx.data even under 2 GiB (always above)")
		ranges := fs.String("ranges", "", `JSON file of calibrated activation ranges by encoding group, {"past_key_3": [-8.5, 9.1], …}`)
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
		if *ir < 8 {
			return usageError("--ir %d: opset 17 needs IR 8 or newer", *ir)
		}
		cont, err := onnx.ParseContainer(*container)
		if err != nil {
			return usageError("--container: %v", err)
		}
		opts := onnx.ExportOptions{
			Options:   onnx.Options{Opset: *opset, Container: cont},
			IRVersion: *ir, External: *external,
			Producer: "qnnprep", Version: qnnprepVersion(),
		}
		if *ranges != "" {
			if opts.Ranges, err = readRanges(*ranges); err != nil {
				return err
			}
		}
		planPath, modelPath, out := fs.Arg(1), fs.Arg(2), fs.Arg(3)
		p, err := shard.ReadPlan(planPath)
		if err != nil {
			return err
		}
		if vs := shard.Check(p, shard.CheckEnv{}); len(vs) > 0 && !*force {
			return fmt.Errorf("%s: %d Genie contract violation(s), first: %s — run `qnnprep check %s`, or --force", planPath, len(vs), vs[0], planPath)
		}
		m, err := model.Open(modelPath)
		if err != nil {
			return err
		}
		defer m.Close()
		var progress func(i, n int, graph string)
		if !*quiet {
			progress = func(i, n int, graph string) {
				if ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "[%d/%d] %s\n", i+1, n, graph)
				}
			}
		}
		paths, err := exportWithContext(ctx, m, p, out, opts, progress)
		if err != nil {
			return err
		}
		var total int64
		for _, path := range paths {
			if st, err := os.Stat(path); err == nil {
				total += st.Size()
			}
		}
		fmt.Printf("wrote %d files (%s) for %d graphs in %s\n", len(paths), humanBytes(total), len(p.Graphs), out)
		return nil
	}
	register(c)
}

// exportWithContext runs onnx.Export, stopping between graphs once ctx is
// cancelled (each file is written atomically, so none is left half done).
func exportWithContext(ctx context.Context, m *model.Model, p *shard.Plan, dir string, opts onnx.ExportOptions, progress func(i, n int, g string)) ([]string, error) {
	var paths []string
	for i := range p.Graphs {
		if err := ctx.Err(); err != nil {
			return paths, err
		}
		one := *p
		one.Graphs = p.Graphs[i : i+1]
		out, err := onnx.Export(m, &one, dir, opts, func(_, _ int, g string) {
			if progress != nil {
				progress(i, len(p.Graphs), g)
			}
		})
		paths = append(paths, out...)
		if err != nil {
			return paths, err
		}
	}
	return paths, nil
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
