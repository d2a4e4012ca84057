package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/sparse"
	"github.com/qnnprep/qnnprep/sparse/study"
)

// compareRow is one variant in `qnnprep compare`.
type compareRow struct {
	Model       string          `json:"model"`
	Pattern     string          `json:"pattern,omitempty"` // qnnprep.sparsity.pattern
	Zeros       float64         `json:"matrix_zeros"`      // exact zeros over the 2-D weights
	WeightBytes int64           `json:"weight_bytes"`
	FileBytes   int64           `json:"file_bytes"`
	Quality     *golden.Summary `json:"quality"`
	// Source is why the golden was accepted for this model.
	Source *golden.Acceptance `json:"source"`
	study.Findings
}

var compareCmd = &command{
	Name:    "compare",
	Usage:   "qnnprep compare MODEL... --golden FILE [--source-fingerprint SHA] [--json] [-t THREADS]",
	Summary: "side-by-side quality of model variants against one golden file (top-1, exact match, cosine, degeneration, bytes)",
	Run:     runCompare,
}

func runCompare(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	goldenPath := fs.String("golden", "", "golden file (qnnprep golden record, or sparsify --report's dense recording)")
	sourceFP := fs.String("source-fingerprint", "", "accept the golden for models made elsewhere (llama.cpp) from the golden's source: its fingerprint (the output shows the override)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	threads := fs.IntP("threads", "t", 2, "threads")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return usageError("want at least one MODEL")
	}
	if *goldenPath == "" {
		return usageError("--golden is required")
	}
	g, err := golden.Read(*goldenPath)
	if err != nil {
		return err
	}
	var rows []compareRow
	for _, path := range fs.Args() {
		row, err := compareOne(ctx, path, g, *sourceFP, *threads)
		if err != nil {
			return err
		}
		rows = append(rows, *row)
	}
	if *asJSON {
		printJSON(rows)
		return nil
	}
	printCompare(os.Stdout, *goldenPath, rows)
	return nil
}

// compareOne measures one variant. The golden must have been recorded from
// the variant's source (golden.File.Accept): variants record the chain that
// made them.
func compareOne(ctx context.Context, path string, g *golden.File, sourceFP string, threads int) (*compareRow, error) {
	m, err := model.Open(path)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	acc, err := g.Accept(m, sourceFP)
	if err != nil {
		return nil, fmt.Errorf("%s against %s: %w", path, g.Name(), err)
	}
	row := &compareRow{Model: path, WeightBytes: study.WeightBytes(m), Source: acc}
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		row.FileBytes = st.Size()
	}
	row.Pattern, _ = m.Metadata.String(sparse.KeyPattern)
	var zeros, total int64
	for _, t := range m.Tensors {
		if len(t.Dims) < 2 || t.Rows() < 2 {
			continue
		}
		w, err := t.Float32()
		if err != nil {
			return nil, err
		}
		for _, x := range w {
			if x == 0 {
				zeros++
			}
		}
		total += int64(len(w))
	}
	if total > 0 {
		row.Zeros = float64(zeros) / float64(total)
	}
	if row.Quality, err = study.Verify(ctx, m, g, threads, &row.Findings, path); err != nil {
		return nil, err
	}
	return row, nil
}

func printCompare(w io.Writer, goldenPath string, rows []compareRow) {
	fmt.Fprintf(w, "against %s:\n", goldenPath)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tpattern\tzeros\ttop-1\texact-match\tmatch-len\tcosine\tdegenerate\tweight bytes\t")
	for _, r := range rows {
		s := r.Quality
		pat := r.Pattern
		if pat == "" {
			pat = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4f\t%.4f\t%.4f\t%.1f\t%s\t%d/%d\t%d\t\n", r.Model, pat, r.Zeros, s.Top1, s.MatchFraction,
			float64(s.Matched)/float64(max(s.Prompts, 1)), cosineCell(s.Cosine), s.Degenerate, s.Prompts, r.WeightBytes)
	}
	tw.Flush()
	for _, r := range rows {
		if r.Source != nil && r.Source.Rule == golden.RuleOverride {
			fmt.Fprintf(w, "%s: golden accepted by %s\n", r.Model, r.Source)
		}
		for _, d := range r.Degenerate {
			fmt.Fprintln(w, "degeneration:", d)
		}
	}
}
