package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Suite is the JSON document `qnnprep bench -o json` and `qnnprep bench
// convert -o json` print: speed reports, one per model, and conversion
// reports. schema.json is its JSON Schema.
type Suite struct {
	Schema      string           `json:"schema"` // SchemaID
	Reports     []*Report        `json:"reports"`
	Conversions []*ConvertReport `json:"conversions"`
}

// NewSuite wraps reports in a Suite.
func NewSuite(reports []*Report, conv []*ConvertReport) *Suite {
	if reports == nil {
		reports = []*Report{}
	}
	if conv == nil {
		conv = []*ConvertReport{}
	}
	return &Suite{Schema: SchemaID, Reports: reports, Conversions: conv}
}

// WriteJSON writes s indented.
func (s *Suite) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// modelLabel is the short model name of a table row: type and size, or
// the file's name when the model did not open.
func modelLabel(m ModelInfo) string {
	if m.Arch == "" {
		return filepath.Base(m.Path)
	}
	return fmt.Sprintf("%s %s %s", m.Arch, paramsLabel(m.Params), m.Type)
}

func paramsLabel(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	default:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
}

func sizeLabel(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
}

func saneLabel(s *bool, note string) string {
	switch {
	case s == nil:
		return "-"
	case *s:
		return "yes"
	default:
		return "NO: " + note
	}
}

// WriteTable writes the speed reports as Markdown tables (llama-bench's
// layout plus the sanity, llama.cpp ratio and load columns), then any
// conversion reports.
func (s *Suite) WriteTable(w io.Writer) error {
	var b strings.Builder
	if len(s.Reports) > 0 {
		b.WriteString("| model | size | engine | threads | test | depth | t/s | vs llama.cpp | weights read (of ceiling) | sane | load |\n")
		b.WriteString("| --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: |\n")
		for _, r := range s.Reports {
			for _, x := range r.Results {
				vs := ""
				if x.VsLlama > 0 {
					vs = fmt.Sprintf("%.2f×", x.VsLlama)
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %d | %s | %s | %s | %s | %.1f |\n",
					modelLabel(r.Model), sizeLabel(r.Model.Bytes), engineLabel(x), x.Threads, x.Test, x.Depth,
					speedLabel(x), vs, readLabel(x), saneLabel(x.Sane, x.SanityNote), x.Load)
			}
		}
		writeSpecTable(&b, s.Reports)
		b.WriteString("\n")
		for _, r := range s.Reports {
			fmt.Fprintf(&b, "%s: %s, %d reps, batch %s, qnnprep kernels %s, %d CPUs%s; peak RSS %s; load %.2f → %.2f; %.0f s",
				r.Model.Path, modelLabel(r.Model), r.Settings.Reps, batchLabel(r.Settings.Batch), kernelsLabel(r.Machine), r.Machine.CPUs, cpuLabel(r.Machine.CPU),
				sizeLabel(r.PeakRSS), r.Machine.LoadStart[0], r.Machine.LoadEnd[0], r.Seconds)
			if len(r.Machine.ReadCeiling) > 0 {
				fmt.Fprintf(&b, "; memory-read ceiling %s", ceilingLabel(r.Machine.ReadCeiling))
			}
			if r.Settings.Fault != "" {
				fmt.Fprintf(&b, "; FAULT INJECTED %s", r.Settings.Fault)
			}
			b.WriteString("\n")
			if r.Error != "" {
				fmt.Fprintf(&b, "%s: FAILED: %s\n", r.Model.Path, errorLine(r.Error))
			}
			for _, x := range r.Results {
				if x.Error != "" && x.Engine != "qnnprep" { // qnnprep's: the model's error above
					fmt.Fprintf(&b, "%s: %s %s, depth %d, %d threads: %s\n", r.Model.Path, engineLabel(x), x.Test, x.Depth, x.Threads, errorLine(x.Error))
				}
			}
		}
	}
	if len(s.Conversions) > 0 {
		if len(s.Reports) > 0 {
			b.WriteString("\n")
		}
		writeConvertTable(&b, s.Conversions)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// engineLabel is the engine column: "llama.cpp (llama-bench, CPU zen4)"
// names the peer that timed a llama.cpp row and the backend it loaded.
func engineLabel(x Result) string {
	var what []string
	for _, s := range []string{x.Peer, x.Backend} {
		if s != "" {
			what = append(what, s)
		}
	}
	if len(what) > 0 {
		return x.Engine + " (" + strings.Join(what, ", ") + ")"
	}
	return x.Engine
}

// speedLabel is the t/s column: "12.30 ± 0.40", or why there is none.
func speedLabel(x Result) string {
	switch {
	case x.TimedOut:
		return "TIMED OUT"
	case strings.HasPrefix(x.Error, "not run"):
		return "NOT RUN"
	case x.Error != "":
		return "FAILED"
	}
	return fmt.Sprintf("%.2f ± %.2f", x.TokensPerSec, x.Stddev)
}

// ErrorLine is the row's Error on one line (errorLine).
func (x Result) ErrorLine() string { return errorLine(x.Error) }

// errorLine is a row's error on one line: its first line, plus the last
// line of the peer's stderr when the error carries it ("…: exit status 3
// (stderr: error: failed to load model)").
func errorLine(s string) string {
	line, rest, _ := strings.Cut(s, "\n")
	if _, stderr, ok := strings.Cut(rest, "stderr:\n"); ok {
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
			line += " (stderr: " + last + ")"
		}
	}
	return line
}

// readLabel is the weights-read column of a tg row: "21.0 GB/s (73%)".
func readLabel(x Result) string {
	switch {
	case x.ReadGBPerSec <= 0:
		return ""
	case x.ReadFraction <= 0:
		return fmt.Sprintf("%.1f GB/s", x.ReadGBPerSec)
	}
	return fmt.Sprintf("%.1f GB/s (%.0f%%)", x.ReadGBPerSec, 100*x.ReadFraction)
}

// loopsLabel is "loops: 15.9 GB/s plain, 17.4 prefetch 1 KiB ahead, …":
// every read loop's upper quartile.
func loopsLabel(ls []LoopRate) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		_, how, _ := strings.Cut(l.Loop, "per thread, ")
		if how == "" {
			how = "plain"
		}
		parts[i] = fmt.Sprintf("%.1f %s", l.GBPerSec, how)
	}
	return "loops (GB/s): " + strings.Join(parts, ", ")
}

// ceilingLabel is "33.1 GB/s with 1 thread, 60.2 GB/s with 2 (upper
// quartile of 256 windows …; median …)": the ceilings the read
// fractions use, and which statistic they are.
func ceilingLabel(cs []Ceiling) string {
	var parts, detail []string
	for i, c := range cs {
		unit := ""
		switch {
		case i == 0 && c.Threads == 1:
			unit = " thread"
		case i == 0:
			unit = " threads"
		}
		parts = append(parts, fmt.Sprintf("%.1f GB/s with %d%s", c.GBPerSec, c.Threads, unit))
		if c.Statistic != "" {
			d := fmt.Sprintf("%d: median %.1f, best %.1f", c.Threads, c.Median, c.Best)
			if c.After > 0 {
				d += fmt.Sprintf(", before %.1f, after %.1f", c.Before, c.After)
			}
			detail = append(detail, d)
		}
	}
	s := strings.Join(parts, ", ")
	switch {
	case len(cs) == 0:
	case cs[0].Statistic == "":
		s += " (best window)"
	default:
		c := cs[0]
		s += fmt.Sprintf(" (%s of %d windows of %s read by %s", c.Statistic, c.Windows, sizeLabel(c.WindowBytes), c.Loop)
		if c.Source == SourceWeights {
			s += fmt.Sprintf(", over %s of the model's own weights as decoding reads them", sizeLabel(c.Bytes))
			if c.Repeats > 1 {
				s += fmt.Sprintf(", each window read %d times in a row", c.Repeats)
			}
		}
		if c.After > 0 {
			s += ", before and after the timings"
		}
		s += "; " + strings.Join(detail, "; ") + ")"
	}
	return s
}

// cpuLabel is ", <model name>" or nothing when the CPU was not recorded.
func cpuLabel(cpu string) string {
	if cpu == "" {
		return ""
	}
	return " (" + cpu + ")"
}

func batchLabel(b int) string {
	if b == 0 {
		return "default"
	}
	return strconv.Itoa(b)
}

func draftLabel(d *ModelInfo) string {
	if d == nil {
		return "-"
	}
	return fmt.Sprintf("%d layers, %s", d.Layers, paramsLabel(d.Params))
}

// csvHeader are the columns of WriteCSV: one row per speed result,
// speculative result (kind "spec", test specTest) and conversion stage
// (kind "convert").
var csvHeader = []string{"model", "type", "engine", "kind", "test", "tokens", "depth", "threads", "k",
	"tokens_per_s", "stddev", "speedup", "acceptance_length", "window_s", "gb_per_s", "seconds",
	"vs_llama_cpp", "sane", "max_abs_diff", "load", "peak_rss_bytes", "peer", "backend", "cpu", "kernels",
	"read_gb_per_s", "read_fraction", "target_calls_per_token", "device_tokens_per_s", "error"}

// WriteCSV writes every result as one CSV row (columns: csvHeader).
func (s *Suite) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	i := strconv.Itoa
	for _, r := range s.Reports {
		for _, x := range r.Results {
			sane := ""
			if x.Sane != nil {
				sane = strconv.FormatBool(*x.Sane)
			}
			row := []string{r.Model.Path, r.Model.Type, x.Engine, x.Kind, x.Test, i(x.Tokens), i(x.Depth), i(x.Threads), "",
				f(x.TokensPerSec), f(x.Stddev), "", "", "", "", "", f(x.VsLlama), sane, f(x.MaxAbsDiff), f(x.Load), strconv.FormatInt(x.PeakRSS, 10), x.Peer, x.Backend, r.Machine.CPU, kernels(x, r.Machine),
				f(x.ReadGBPerSec), f(x.ReadFraction), "", "", errorLine(x.Error)}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
		for _, x := range r.Speculative {
			row := []string{r.Model.Path, r.Model.Type, "qnnprep", "spec", specTest(x), i(x.Tokens), i(x.Depth), i(x.Threads), i(x.K),
				f(x.SpecTokensPerSec), "", f(x.Speedup), f(x.AcceptanceLength), f(x.WindowSeconds), "", "", "", strconv.FormatBool(x.Sane), "", f(x.Load), "", "", "", r.Machine.CPU, kernelsLabel(r.Machine), "", "", f(x.TargetCallsPerToken), deviceCSV(x.Device), ""}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	for _, c := range s.Conversions {
		for _, st := range c.Stages {
			row := []string{c.Source, c.Recipe, "qnnprep", "convert", st.Name, "", "", "", "",
				"", "", "", "", "", f(st.GBPerSec), f(st.Seconds), "", "", "", f(c.Load), strconv.FormatInt(st.PeakRSS, 10), "", "", "", "", "", "", "", "", ""}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadSuites decodes saved Suite documents (the output of -o json) and
// merges them into one, strictly: unknown fields and another schema are
// errors naming the file.
func ReadSuites(paths ...string) (*Suite, error) {
	all := NewSuite(nil, nil)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		s, err := decodeSuite(b, p)
		if err != nil {
			return nil, err
		}
		all.Reports = append(all.Reports, s.Reports...)
		all.Conversions = append(all.Conversions, s.Conversions...)
	}
	return all, nil
}

// decodeSuite decodes one saved Suite strictly: one JSON object, no
// unknown fields, the current schema, no null reports.
func decodeSuite(b []byte, name string) (*Suite, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Suite
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("bench: %s: data after the JSON object", name)
	}
	if s.Schema != SchemaID {
		return nil, fmt.Errorf("bench: %s: schema %q, want %q", name, s.Schema, SchemaID)
	}
	for i, r := range s.Reports {
		if r == nil {
			return nil, fmt.Errorf("bench: %s: report %d is null", name, i)
		}
	}
	for i, c := range s.Conversions {
		if c == nil {
			return nil, fmt.Errorf("bench: %s: conversion %d is null", name, i)
		}
	}
	return &s, nil
}

// kernels is the kernel set of a qnnprep row ("" for llama.cpp's, whose
// backend column says what it ran).
func kernels(x Result, m Machine) string {
	if x.Engine != "qnnprep" {
		return ""
	}
	return kernelsLabel(m)
}
