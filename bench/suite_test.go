package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/gguf"
)

// TestRunAllFailedModel: a model that fails in a multi-model run (here a
// file cut short) keeps the reports of the models before and after it;
// its report says why, every row it was to have is FAILED with the reason
// (JSON error, CSV error column, table, plot header), and each model that
// ran has its own read ceiling: the probe read its weights.
func TestRunAllFailedModel(t *testing.T) {
	q8, q1 := smallModel(t, gguf.Q8_0), smallModel(t, gguf.Q1_0)
	b, err := os.ReadFile(q8)
	require.NoError(t, err)
	broken := filepath.Join(t.TempDir(), "broken.gguf")
	require.NoError(t, os.WriteFile(broken, b[:len(b)/2], 0o644))

	opt := Options{Prompt: 8, Gen: 4, Depths: []int{0, 8}, Reps: 1, Threads: []int{1, 2}}
	s, err := RunAll(context.Background(), []string{q8, broken, q1}, opt)
	require.NoError(t, err)
	require.Len(t, s.Reports, 3)
	bad := s.Reports[1]
	if got := s.Failed(); len(got) != 1 || got[0] != bad || len(s.PeerFailures()) != 0 {
		t.Fatalf("failed reports %v, peer failures %v", got, s.PeerFailures())
	}
	if bad.Model.Path != broken || !strings.Contains(bad.Error, "broken.gguf") || len(bad.Results) != 2*2*2 || bad.Machine.ReadCeiling != nil {
		t.Fatalf("failed report: model %+v, error %q, %d rows, ceiling %v", bad.Model, bad.Error, len(bad.Results), bad.Machine.ReadCeiling)
	}
	for _, x := range bad.Results {
		if x.Engine != "qnnprep" || x.Error != bad.Error || len(x.Samples) != 0 || x.TokensPerSec != 0 {
			t.Errorf("failed row %+v", x)
		}
	}
	for _, r := range []*Report{s.Reports[0], s.Reports[2]} {
		if r.Error != "" || len(r.Results) != 8 || !r.Sane || len(r.Machine.ReadCeiling) != 2 || r.Machine.ReadCeiling[0].Source != SourceWeights {
			t.Fatalf("%s: error %q, %d rows, sane %v, ceiling %+v", r.Model.Path, r.Error, len(r.Results), r.Sane, r.Machine.ReadCeiling)
		}
		for _, x := range r.Results {
			if x.Error != "" || x.Kind == "tg" && x.ReadFraction != x.ReadGBPerSec/ceilingFor(r.Machine.ReadCeiling, x.Threads) {
				t.Errorf("%s: row %+v", r.Model.Path, x)
			}
		}
	}
	// Q8_0 weights are about four times Q1_0's: each model's ceiling
	// read its own.
	if b8, b1 := s.Reports[0].Machine.ReadCeiling[0].Bytes, s.Reports[2].Machine.ReadCeiling[0].Bytes; b8 < 3*b1 {
		t.Errorf("ceilings read %d bytes of Q8_0 and %d of Q1_0", b8, b1)
	}

	tb := validTable(t, s).String()
	if strings.Count(tb, "| FAILED |") != 8 || !strings.Contains(tb, broken+": FAILED: "+bad.Error) {
		t.Errorf("table:\n%s", tb)
	}
	rows, col := suiteCSV(t, s)
	failed := 0
	for _, row := range rows[1:] {
		if row[col["model"]] == broken && row[col["error"]] == bad.Error {
			failed++
		}
	}
	if failed != 8 {
		t.Errorf("%d CSV rows of %s carry its error", failed, broken)
	}
	var svg bytes.Buffer
	require.NoError(t, Plot(&svg, "svg", s))
	if !strings.Contains(svg.String(), broken+" FAILED: ") || !strings.Contains(svg.String(), "(FAILED)") {
		t.Error("plot header does not name the failed model")
	}
	// A run whose every model failed still plots: the header says why.
	svg.Reset()
	require.NoError(t, Plot(&svg, "svg", NewSuite([]*Report{bad}, nil)))
	require.Contains(t, svg.String(), broken+" FAILED: ")
	// Reading the JSON back keeps the failure.
	p := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(p, suiteJSON(t, s), 0o644))
	back, err := ReadSuites(p)
	require.NoError(t, err)
	require.Len(t, back.Failed(), 1)

	// Only a model's own failure goes on: an interrupt ends the run.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s, err := RunAll(ctx, []string{q8, q1}, opt); err == nil || s != nil {
		t.Errorf("interrupted: %v, %v", s, err)
	}
}

// TestRunSelfDraft: --draft naming the benchmarked model's own file drafts
// with the timed engine: the file is mapped once through the whole run
// (/proc/self/maps, looked at whenever the run logs a line), and the
// speculative rows decode what greedy decoding does.
func TestRunSelfDraft(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("reads /proc/self/maps")
	}
	p := smallModel(t, gguf.Q8_0)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	w := &mapsWatch{path: p}
	opt := Options{Prompt: 8, Gen: 6, Reps: 1, Threads: []int{1, 2}, DraftPath: p, K: []int{2}, Log: w}
	rep, err := Run(context.Background(), p, opt)
	require.NoError(t, err)
	if len(rep.Speculative) != 2 || rep.Draft == nil || rep.Draft.Path != p {
		t.Fatalf("speculative %+v, draft %+v", rep.Speculative, rep.Draft)
	}
	for _, s := range rep.Speculative {
		if !s.Sane || s.AcceptanceLength != float64(s.K) { // a model drafting for itself is always right
			t.Errorf("speculative %+v", s)
		}
	}
	page := int64(os.Getpagesize())
	if w.lines == 0 || w.most == 0 || w.most > (fi.Size()+page-1)/page*page {
		t.Errorf("%s (%d bytes) mapped at most %d bytes at once over %d log lines", p, fi.Size(), w.most, w.lines)
	}
}

// mapsWatch is a log writer that records, at every line, how many bytes
// of the process's address space map path.
type mapsWatch struct {
	path  string
	lines int
	most  int64
}

func (w *mapsWatch) Write(b []byte) (int, error) {
	w.lines++
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return len(b), nil
	}
	defer f.Close()
	var n int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[len(fields)-1] != w.path {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		z, _ := strconv.ParseUint(hi, 16, 64)
		n += int64(z - a)
	}
	w.most = max(w.most, n)
	return len(b), nil
}

// TestReportFail: a model failing midway keeps the rows it measured; each
// test of the settings it did not measure gets a FAILED row.
func TestReportFail(t *testing.T) {
	opt := Options{Prompt: 8, Gen: 4, Depths: []int{0, 8}, Threads: []int{1, 2}}
	r := &Report{Results: []Result{
		{Engine: "qnnprep", Test: "pp8", Kind: "pp", Tokens: 8, Depth: 0, Threads: 1, TokensPerSec: 10, Samples: []float64{10}},
		{Engine: "qnnprep", Test: "tg4", Kind: "tg", Tokens: 4, Depth: 0, Threads: 1, TokensPerSec: 5, Samples: []float64{5}},
		{Engine: "llama.cpp", Test: "pp8", Kind: "pp", Tokens: 8, Depth: 8, Threads: 1, TokensPerSec: 9, Samples: []float64{9}},
		{Engine: "qnnprep", Test: "pp8", Kind: "pp", Tokens: 8, Depth: 8, Threads: 1, TokensPerSec: 11, Samples: []float64{11}},
	}}
	r.fail(errors.New("runtime: out of luck"), &opt)
	require.Equal(t, "runtime: out of luck", r.Error)
	type key struct {
		test           string
		depth, threads int
	}
	var failed []key
	for _, x := range r.Results[4:] {
		if x.Engine != "qnnprep" || x.Error != r.Error || len(x.Samples) != 0 || x.Samples == nil {
			t.Errorf("row %+v", x)
		}
		failed = append(failed, key{x.Test, x.Depth, x.Threads})
	}
	require.Equal(t, []key{{"tg4", 8, 1}, {"pp8", 0, 2}, {"tg4", 0, 2}, {"pp8", 8, 2}, {"tg4", 8, 2}}, failed)
	for _, x := range r.Results[:4] {
		if x.Error != "" {
			t.Errorf("a measured row was marked: %+v", x)
		}
	}
}
