package bench

import (
	"context"
	"io"
)

// RunAll measures each model with opt (Run) and returns their reports as
// a Suite, in the order given. A model that fails leaves its report with
// the error (Report.Error, Suite.Failed) and the next model is measured;
// only an error that is no model's (the options, the llama.cpp peer
// missing) or an interrupt ends the run.
func RunAll(ctx context.Context, paths []string, opt Options) (*Suite, error) {
	var reports []*Report
	for _, path := range paths {
		r, err := Run(ctx, path, opt)
		if r == nil {
			return nil, err
		}
		if err != nil {
			opt.logf("%s: FAILED: %v", path, err)
		}
		reports = append(reports, r)
	}
	return NewSuite(reports, nil), nil
}

// ConvertAll times every source with every recipe (Convert, with
// opt.Recipe set per run) and returns the reports as a Suite, source by
// source.
func ConvertAll(ctx context.Context, sources, recipes []string, opt ConvertOptions) (*Suite, error) {
	var convs []*ConvertReport
	for _, src := range sources {
		for _, r := range recipes {
			o := opt
			o.Recipe = r
			cr, err := Convert(ctx, src, o)
			if err != nil {
				return nil, err
			}
			convs = append(convs, cr)
		}
	}
	return NewSuite(nil, convs), nil
}

// Output formats of Suite.Write.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatCSV   = "csv"
)

// Write writes s in format: FormatJSON, FormatCSV, else the table.
func (s *Suite) Write(w io.Writer, format string) error {
	switch format {
	case FormatJSON:
		return s.WriteJSON(w)
	case FormatCSV:
		return s.WriteCSV(w)
	}
	return s.WriteTable(w)
}

// Insane returns the speed reports in which a timed run disagreed with
// its reference run (the sanity column).
func (s *Suite) Insane() []*Report {
	var bad []*Report
	for _, r := range s.Reports {
		if !r.Sane {
			bad = append(bad, r)
		}
	}
	return bad
}

// Failed returns the speed reports whose model failed (Report.Error).
func (s *Suite) Failed() []*Report {
	var bad []*Report
	for _, r := range s.Reports {
		if r.Error != "" {
			bad = append(bad, r)
		}
	}
	return bad
}

// PeerFailures returns the llama.cpp rows without timings: their peer
// failed, timed out or was not run after a timeout (Result.Error).
func (s *Suite) PeerFailures() []Result {
	var bad []Result
	for _, r := range s.Reports {
		for _, x := range r.Results {
			if x.Error != "" && x.Engine == "llama.cpp" {
				bad = append(bad, x)
			}
		}
	}
	return bad
}
