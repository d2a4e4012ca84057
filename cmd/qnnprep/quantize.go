package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/tokenizer"
)

var quantizeCmd = &command{
	Name:    "quantize",
	Usage:   "qnnprep quantize IN OUT --recipe q1|int8|q8_0|f16|bf16|keep [--override 'PATTERN=TYPE']... [--report FILE] [--json]",
	Summary: "quantize an HF directory or GGUF into a qmodel GGUF (streaming, both cores)",
	Run:     runQuantize,
}

func runQuantize(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	recipeFlags := addRecipeFlags(fs, "", "recipe")
	report := fs.String("report", "", "write the per-tensor report as JSON to FILE")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of a table")
	threads := fs.IntP("threads", "t", 0, "worker threads (0: all CPUs)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("want IN and OUT")
	}
	r, rules, err := recipeFlags()
	if err != nil {
		return err
	}
	if err := checkPaths(modelInput(fs.Arg(0)), []string{fs.Arg(1), *report}, nil); err != nil {
		return err
	}
	m, err := model.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer m.Close()
	md, err := tokenizer.ModelMetadata(m)
	if err != nil {
		return err
	}
	bar := newProgress("quantize", *asJSON)
	rep, err := quantize.Run(ctx, m, fs.Arg(1), quantize.Options{
		Recipe: r, Overrides: rules, Workers: *threads, Metadata: md, Progress: bar.set,
	})
	bar.finish()
	if err != nil {
		return err
	}
	if *report != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := atomicfile.WriteFile(*report, append(b, '\n')); err != nil {
			return err
		}
	}
	if *asJSON {
		printJSON(rep)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tensor\tsource\ttype\tbpw\tbytes\trel-RMSE\tcosine\t")
	for _, t := range rep.Tensors {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3f\t%d\t%.5f\t%.6f\t\n", t.Name, t.Source, t.Type, t.BPW, t.Bytes, t.RelRMSE, t.Cosine)
	}
	tw.Flush()
	for _, f := range rep.Fallbacks {
		fmt.Println("fallback:", f)
	}
	fmt.Printf("%s → %s: recipe %s, %d weights at %.3f bpw, %d → %d bytes in %.2fs (%.2f GB/s of source)\n",
		rep.Source, rep.Output, rep.Recipe, rep.Weights, rep.BPW, rep.SourceBytes, rep.OutputBytes, rep.Seconds,
		float64(rep.SourceBytes)/rep.Seconds/1e9)
	return nil
}
