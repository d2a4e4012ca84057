package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// smallModel writes a small synthetic llama (hidden 256, 2 layers, every
// matrix row a multiple of 128) in typ.
func smallModel(t testing.TB, typ gguf.Type) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "llama-"+typ.String()+".gguf")
	cfg := synth.Config(model.Llama, true)
	cfg.ContextLength = 512
	if err := synth.WriteGGUF(p, cfg, 7, typ); err != nil {
		t.Fatal(err)
	}
	return p
}

// validTable checks that s's JSON validates against the schema and
// returns its table.
func validTable(t *testing.T, s *Suite) *bytes.Buffer {
	t.Helper()
	if err := validate(t, compileSchema(t), suiteJSON(t, s)); err != nil {
		t.Fatalf("JSON does not validate: %v", err)
	}
	var tb bytes.Buffer
	require.NoError(t, s.WriteTable(&tb))
	return &tb
}

// suiteCSV writes s as CSV and returns its rows and each column's index.
func suiteCSV(t *testing.T, s *Suite) ([][]string, map[string]int) {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, s.WriteCSV(&b))
	rows, err := csv.NewReader(&b).ReadAll()
	require.NoError(t, err)
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	return rows, col
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, data []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

func suiteJSON(t *testing.T, s *Suite) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// smallOpts probes the small model's weights: cache-resident, so their
// GB/s mean nothing, but the report's plumbing is the same.
var smallOpts = Options{Prompt: 12, Gen: 6, Depths: []int{0, 20}, Reps: 2, Threads: []int{1, 2}, DraftLayers: 1, K: []int{1, 3}}

func TestRunSmall(t *testing.T) {
	p := smallModel(t, gguf.Q8_0)
	rep, err := Run(context.Background(), p, smallOpts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rep.Results), 2*2*2; got != want {
		t.Fatalf("%d results, want %d", got, want)
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Test] = true
		if r.Sane == nil || !*r.Sane {
			t.Errorf("%s depth %d threads %d: sane %v (%s), want true", r.Test, r.Depth, r.Threads, r.Sane, r.SanityNote)
		}
		if r.MaxAbsDiff != 0 {
			t.Errorf("%s: max |Δlogit| %g, want 0 (the runtime is bit-exact across threads and batches)", r.Test, r.MaxAbsDiff)
		}
		if len(r.Samples) != 2 || r.TokensPerSec <= 0 {
			t.Errorf("%s: samples %v, mean %g", r.Test, r.Samples, r.TokensPerSec)
		}
	}
	if !seen["pp12"] || !seen["tg6"] {
		t.Errorf("tests %v, want pp12 and tg6", seen)
	}
	if len(rep.Speculative) != 2*2 {
		t.Fatalf("%d speculative results, want 4", len(rep.Speculative))
	}
	// The speculative runs continue the default text, tokenized.
	m, err := model.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.ForModel(m, p)
	if err != nil {
		t.Fatal(err)
	}
	text := len(tok.Encode(DefaultSpecText, true))
	if rep.Settings.SpecPrompt != "text: "+DefaultSpecText {
		t.Errorf("speculative prompt %q", rep.Settings.SpecPrompt)
	}
	for _, s := range rep.Speculative {
		if !s.Sane || s.Speedup <= 0 || s.AcceptanceLength < 0 || s.AcceptanceLength > float64(s.K) {
			t.Errorf("speculative %+v", s)
		}
		if s.Depth != text { // depth 0 + the text's tokens
			t.Errorf("speculative prompt %d tokens, want %d", s.Depth, text)
		}
	}
	if !rep.Sane || rep.PeakRSS <= 0 || rep.Model.Params <= 0 || rep.Model.Type != "Q8_0" || rep.Draft == nil || rep.Draft.Layers != 1 {
		t.Errorf("report sane %v, rss %d, model %+v, draft %+v", rep.Sane, rep.PeakRSS, rep.Model, rep.Draft)
	}
	if rep.Machine.Kernels != runtime.KernelSet() || rep.Machine.CPU != cpuModel() || goruntime.GOOS == "linux" && rep.Machine.CPU == "" {
		t.Errorf("machine kernels %q, CPU %q; want %q and this CPU's model name %q", rep.Machine.Kernels, rep.Machine.CPU, runtime.KernelSet(), cpuModel())
	}
	// Decoding reads every weight but the embedding table (the model has
	// its own output head); each tg row is that stream over the ceiling
	// measured with its thread count.
	var all, embd int64
	for _, tn := range m.Tensors {
		all += tn.Bytes()
		if tn.Name == "token_embd.weight" {
			embd = tn.Bytes()
		}
	}
	if m.Tensor("output.weight") == nil || rep.Model.DecodeBytes != all-embd {
		t.Errorf("decode bytes %d, want %d (all %d − embedding %d)", rep.Model.DecodeBytes, all-embd, all, embd)
	}
	// The probe read those weights' matrices (the norms are vectors the
	// runtime reads as float32), each in whole grains.
	var matrices int64
	for _, tn := range m.Tensors {
		if len(tn.Dims) == 2 && tn.Name != "token_embd.weight" {
			matrices += tn.Bytes() - tn.Bytes()%probeGrain
		}
	}
	if c := rep.Machine.ReadCeiling; len(c) != 2 || c[0].Threads != 1 || c[1].Threads != 2 || c[0].Bytes != matrices || c[0].WindowBytes != matrices ||
		c[0].Source != SourceWeights || !(c[0].Before > 0 && c[0].After > 0) || c[0].Statistic != StatUpperQuartile {
		t.Fatalf("read ceiling %+v, want 1 and 2 threads over the model's %d bytes of matrices, probed before and after", c, matrices)
	}
	for _, r := range rep.Results {
		c := ceilingFor(rep.Machine.ReadCeiling, r.Threads)
		want := float64(rep.Model.DecodeBytes) * r.TokensPerSec / 1e9
		if r.Kind == "pp" {
			want = 0
		}
		if r.ReadGBPerSec != want || want > 0 && r.ReadFraction != want/c || want == 0 && r.ReadFraction != 0 {
			t.Errorf("%s %d threads: read %g GB/s, fraction %g; want %g GB/s over %g", r.Test, r.Threads, r.ReadGBPerSec, r.ReadFraction, want, c)
		}
	}

	s := NewSuite([]*Report{rep}, nil)
	tb := validTable(t, s)
	if strings.Contains(tb.String(), "NO:") || !strings.Contains(tb.String(), "| yes |") || !strings.Contains(tb.String(), "speed-up") ||
		!strings.Contains(tb.String(), "qnnprep kernels "+runtime.KernelSet()) || !strings.Contains(tb.String(), "memory-read ceiling ") ||
		!strings.Contains(tb.String(), " GB/s (") {
		t.Errorf("table:\n%s", tb.String())
	}
	rows, _ := suiteCSV(t, s)
	if len(rows) != 1+8+4 {
		t.Errorf("%d CSV rows, want 13", len(rows))
	}
}

// TestFaultFlagged breaks a kernel on purpose (the input of one layer's
// down projection scaled by 1.001 on the timed engines only) and checks
// that the sanity column says so, while a fault matching no tensor leaves
// every run sane.
func TestFaultFlagged(t *testing.T) {
	p := smallModel(t, gguf.Q8_0)
	opt := Options{Prompt: 8, Gen: 4, Depths: []int{0, 8}, Reps: 1, Threads: []int{2}, ProbeBytes: -1}
	for _, tc := range []struct {
		fault string
		sane  bool
	}{
		{"blk.0.ffn_down.weight=1.001", false},
		{"blk.*.attn_q.weight=0.5", false},
		{"output.weight=1.0001", false},
		{"no.such.tensor=2", true},
	} {
		f, err := ParseFault(tc.fault)
		if err != nil {
			t.Fatal(err)
		}
		o := opt
		o.Fault = f
		rep, err := Run(context.Background(), p, o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Sane != tc.sane {
			t.Errorf("fault %s: report sane %v, want %v", tc.fault, rep.Sane, tc.sane)
		}
		for _, r := range rep.Results {
			if r.Sane == nil || *r.Sane != tc.sane {
				t.Errorf("fault %s: %s depth %d: sane %v (%s), want %v", tc.fault, r.Test, r.Depth, r.Sane, r.SanityNote, tc.sane)
			}
			if !tc.sane && (r.SanityNote == "" || r.MaxAbsDiff == 0) {
				t.Errorf("fault %s: %s: note %q, max diff %g", tc.fault, r.Test, r.SanityNote, r.MaxAbsDiff)
			}
		}
		var tb bytes.Buffer
		if err := NewSuite([]*Report{rep}, nil).WriteTable(&tb); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(tb.String(), "| NO: "); got == tc.sane {
			t.Errorf("fault %s: table shows NO: %v\n%s", tc.fault, got, tb.String())
		}
		if err := validate(t, compileSchema(t), suiteJSON(t, NewSuite([]*Report{rep}, nil))); err != nil {
			t.Errorf("fault %s: JSON does not validate: %v", tc.fault, err)
		}
	}
}

func TestParseFault(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"blk.0.ffn_down.weight=1.01", true},
		{"*=0", true},
		{"blk.0.ffn_down.weight", false},
		{"=2", false},
		{"x=abc", false},
		{"x=NaN", false},
		{"x=Inf", false},
		{"[=1", false},
	} {
		f, err := ParseFault(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseFault(%q) = %v, %v; want ok %v", tc.in, f, err, tc.ok)
		}
	}
}

func TestOptionsRejected(t *testing.T) {
	p := smallModel(t, gguf.Q8_0)
	for _, o := range []Options{
		{},                                               // nothing to measure
		{Prompt: 4, Depths: []int{-1}},                   // negative depth
		{Prompt: 4, Threads: []int{0}},                   // no threads
		{Prompt: 4, Reps: -1},                            // negative reps
		{Gen: 4, DraftLayers: 1, K: []int{0}},            // K 0
		{Gen: 1, DraftLayers: 1},                         // speculative needs 2 tokens
		{Gen: 4, DraftLayers: 1, DraftPath: p},           // both drafts
		{Gen: 4, DraftLayers: 2},                         // the whole model is no draft
		{Prompt: 4, Llama: true, LlamaPeer: "llamafile"}, // unknown llama.cpp peer
	} {
		if _, err := Run(context.Background(), p, o); err == nil {
			t.Errorf("Run(%+v): no error", o)
		}
	}
	if _, err := Run(context.Background(), filepath.Join(t.TempDir(), "missing.gguf"), Options{Prompt: 4}); err == nil {
		t.Error("missing model: no error")
	}
}

// TestSchemaRejects checks that the schema is not vacuous.
func TestSchemaRejects(t *testing.T) {
	s := compileSchema(t)
	good := `{"schema":"` + SchemaID + `","reports":[],"conversions":[]}`
	if err := validate(t, s, []byte(good)); err != nil {
		t.Fatalf("minimal suite: %v", err)
	}
	for _, bad := range []string{
		`{"schema":"x","reports":[],"conversions":[]}`,
		`{"schema":"` + SchemaID + `","reports":[{}],"conversions":[]}`,
		`{"schema":"` + SchemaID + `","reports":[],"conversions":[],"extra":1}`,
		`{"schema":"` + SchemaID + `","reports":[]}`,
	} {
		if err := validate(t, s, []byte(bad)); err == nil {
			t.Errorf("schema accepts %s", bad)
		}
	}
	// A real report with one wrong field must fail too.
	var doc map[string]any
	rep := fakeReport()
	b, _ := json.Marshal(NewSuite([]*Report{rep}, nil))
	if err := validate(t, s, b); err != nil {
		t.Fatalf("fake report: %v", err)
	}
	json.Unmarshal(b, &doc)
	doc["reports"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)["kind"] = "xx"
	b, _ = json.Marshal(doc)
	if err := validate(t, s, b); err == nil {
		t.Error("schema accepts kind xx")
	}
	// Read rates belong to tg rows, a fraction needs its rate, and a
	// ceiling says what it read.
	for name, breakIt := range map[string]func(r *Report){
		"pp row with a read rate":  func(r *Report) { r.Results[0].ReadGBPerSec = 1 },
		"fraction without a rate":  func(r *Report) { r.Results[3].ReadGBPerSec = 0 },
		"ceiling of no bytes":      func(r *Report) { r.Machine.ReadCeiling[0].Bytes = 0 },
		"ceiling of no windows":    func(r *Report) { r.Machine.ReadCeiling[0].Windows = 0 },
		"ceiling of zero threads":  func(r *Report) { r.Machine.ReadCeiling[0].Threads = 0 },
		"empty ceiling list":       func(r *Report) { r.Machine.ReadCeiling = []Ceiling{} },
		"decode bytes of no bytes": func(r *Report) { r.Model.DecodeBytes = -1 },
	} {
		rep := fakeReport()
		breakIt(rep)
		b, _ := json.Marshal(NewSuite([]*Report{rep}, nil))
		if name == "empty ceiling list" {
			b = bytes.Replace(b, []byte(`"kernels":"asm"`), []byte(`"kernels":"asm","read_ceiling":[]`), 1)
		}
		if err := validate(t, s, b); err == nil {
			t.Errorf("schema accepts a report with a %s", name)
		}
	}
}

// randomSpans returns spans of the given lengths filled with random bytes.
func randomSpans(seed uint64, lens ...int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 3))
	var out [][]byte
	for _, n := range lens {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		out = append(out, b)
	}
	return out
}

// TestReadCeiling: the probe reads the spans in whole grains, in windows
// of at most probeWindow bytes all of one size (weights smaller than a
// window: one window, read several times per timing), at most the limit,
// times at least one window per thread count, and stops when the context
// is done.
func TestReadCeiling(t *testing.T) {
	big := randomSpans(1, 20<<20+100, 1000, 300, 30<<20+7)  // 50 MiB + 4 grains in whole grains
	small := randomSpans(2, 100<<10+255, 5000, 255, 64<<10) // 100 KiB + 19 grains + 64 KiB
	for _, tc := range []struct {
		name                   string
		spans                  [][]byte
		limit                  int64
		bytes, window, repeats int64
	}{
		{"smaller than a window", small, 0, 100<<10 + 19*256 + 64<<10, 100<<10 + 19*256 + 64<<10, probeWindow / (100<<10 + 19*256 + 64<<10)},
		{"two windows", big, 0, 50<<20 + 4*256, 25<<20 + 2*256, 1},
		{"limited", big, 3<<20 + 1000, 3<<20 + 768, 3<<20 + 768, probeWindow / (3<<20 + 768)},
	} {
		cs, err := ReadCeiling(context.Background(), tc.spans, tc.limit, []int{1, 3})
		require.NoError(t, err, tc.name)
		if len(cs) != 2 || cs[0].Threads != 1 || cs[1].Threads != 3 {
			t.Fatalf("%s: ceilings %+v", tc.name, cs)
		}
		for _, c := range cs {
			if c.Bytes != tc.bytes || c.WindowBytes != tc.window || int64(c.Repeats) != tc.repeats || c.Source != SourceWeights ||
				c.Windows < 1 || c.Windows > probeMaxWindows || !(c.GBPerSec > 0) ||
				c.Statistic != StatUpperQuartile || !(c.Median <= c.GBPerSec && c.GBPerSec <= c.Best) || c.Before != c.GBPerSec || c.After != 0 ||
				!strings.HasPrefix(c.Loop, probeSet+", 4 streams") || len(c.Loops) != len(probeLoops) || !slices.ContainsFunc(c.Loops, func(l LoopRate) bool {
				return l.Loop == c.Loop && l.GBPerSec == c.GBPerSec && l.Windows == c.Windows
			}) {
				t.Errorf("%s: ceiling %+v, want %d bytes in windows of %d, each read %d times", tc.name, c, tc.bytes, tc.window, tc.repeats)
			}
		}
	}
	// Nothing to read: no ceiling, no error.
	if cs, err := ReadCeiling(context.Background(), randomSpans(3, 255, 100), 0, []int{1}); err != nil || cs != nil {
		t.Errorf("spans under a grain: %+v, %v", cs, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadCeiling(ctx, small, 0, []int{1}); err == nil {
		t.Error("cancelled context: no error")
	}
}

// TestProbePlan: the windows' shares, for any thread count, read every
// byte of the spans the plan keeps exactly once (a byte missed or read
// twice changes the XOR of random data), in the spans' order.
func TestProbePlan(t *testing.T) {
	spans := randomSpans(4, 3000, 256, 70000, 1024, 999, 5<<20+77, 4096)
	for _, limit := range []int64{0, 70000, 1 << 20} {
		for _, window := range []int64{probeWindow, 64 << 10} { // the real window; a small one, for many windows
			p := newProbePlan(spans, limit, window)
			// What the plan keeps: the spans' whole grains, laid end to
			// end, cut to whole windows.
			var kept []byte
			for _, s := range spans {
				kept = append(kept, s[:len(s)-len(s)%probeGrain]...)
			}
			if limit > 0 {
				kept = kept[:min(int64(len(kept)), limit)]
			}
			if d := int64(len(kept)) - p.total; d < 0 || d >= int64(p.windows)*probeGrain || p.total != p.window*int64(p.windows) {
				t.Fatalf("limit %d, window %d: %d bytes in %d windows of %d, of %d kept", limit, window, p.total, p.windows, p.window, len(kept))
			}
			want := xorStreamsGo(kept[:p.total], 1)
			for _, th := range []int{1, 2, 3, 7} {
				for _, l := range probeLoops {
					var got uint64
					var read int64
					for k := range p.windows {
						for _, sh := range p.shares(k, th) {
							got ^= xorPieces(sh, l)
							for _, b := range sh {
								read += int64(len(b))
							}
						}
					}
					if got != want || read != p.total {
						t.Errorf("limit %d, window %d, %d threads, %s: read %d bytes, XOR %#x; want %d, %#x", limit, window, th, l.label(), read, got, p.total, want)
					}
				}
			}
		}
	}
}

// TestCeilingStatistics: the ceiling is the upper quartile of every
// window timed, before and after the timings; each probe's own upper
// quartile is kept beside it.
func TestCeilingStatistics(t *testing.T) {
	one := func(s ...float64) []loopSamples { return []loopSamples{{loop: "l", gbps: s}} }
	before := []Ceiling{{Threads: 1, Load: 1, samples: one(4, 1, 3, 2)}, {Threads: 2, Load: 2, samples: one(10)}}
	after := []Ceiling{{Threads: 1, Load: 3, samples: one(8, 5, 7, 6)}}
	for i := range before {
		before[i].summarise()
		before[i].Before = before[i].GBPerSec
	}
	for i := range after {
		after[i].summarise()
	}
	got := mergeCeilings(before, after)
	for _, tc := range []struct {
		c                                       Ceiling
		windows                                 int
		gbps, median, best, before, after, load float64
	}{
		{got[0], 8, 6, 4.5, 8, 3, 7, 2},
		{got[1], 1, 10, 10, 10, 10, 0, 2},
	} {
		c := tc.c
		if c.Windows != tc.windows || c.GBPerSec != tc.gbps || c.Median != tc.median || c.Best != tc.best || c.Before != tc.before || c.After != tc.after || c.Load != tc.load {
			t.Errorf("%d threads: %+v, want %d windows, %g GB/s (median %g, best %g, before %g, after %g), load %g",
				c.Threads, c, tc.windows, tc.gbps, tc.median, tc.best, tc.before, tc.after, tc.load)
		}
	}
	if before[0].Windows != 4 || len(before[0].samples[0].gbps) != 4 {
		t.Errorf("merging changed the probe before: %+v", before[0])
	}
}

// TestCeilingFastestLoop: with several read loops the ceiling is the one
// whose upper quartile is highest, over both probes' windows (a loop
// that won before may lose after merging), and every loop's is listed.
func TestCeilingFastestLoop(t *testing.T) {
	before := Ceiling{Threads: 1, samples: []loopSamples{
		{loop: "plain", gbps: []float64{10, 11, 12, 13}},                // upper quartile 12
		{loop: "prefetch", gbps: []float64{9, 10, 11, 20}},              // 11, though its best is 20
		{loop: "prefetch far", gbps: []float64{11.5, 11.5, 12.5, 12.5}}, // 12.5
	}}
	before.summarise()
	before.Before = before.GBPerSec
	want := []LoopRate{{"plain", 12, 4}, {"prefetch", 11, 4}, {"prefetch far", 12.5, 4}}
	if before.Loop != "prefetch far" || before.GBPerSec != 12.5 || before.Median != 12 || before.Best != 12.5 || before.Windows != 4 ||
		!slices.Equal(before.Loops, want) {
		t.Errorf("before: %+v, want prefetch far's 12.5 GB/s (median 12, best 12.5) and loops %+v", before, want)
	}
	after := Ceiling{Threads: 1, samples: []loopSamples{
		{loop: "plain", gbps: []float64{14, 14, 14, 14}},
		{loop: "prefetch", gbps: []float64{12, 12, 12, 12}},
		{loop: "prefetch far", gbps: []float64{11, 11, 11, 11}},
	}}
	after.summarise()
	got := mergeCeilings([]Ceiling{before}, []Ceiling{after})[0]
	if got.Loop != "plain" || got.GBPerSec != 14 || got.Windows != 8 || got.Before != 12.5 || got.After != 14 || len(got.Loops) != 3 ||
		got.Loops[1] != (LoopRate{"prefetch", 12, 8}) {
		t.Errorf("merged: %+v, want plain's 14 GB/s over 8 windows, before 12.5, after 14", got)
	}
	if before.Loop != "prefetch far" || len(before.Loops) != 3 || before.Loops[0].GBPerSec != 12 {
		t.Errorf("merging changed the probe before: %+v", before)
	}
}

func fakeReport() *Report {
	yes := true
	return &Report{
		Model:    ModelInfo{Path: "m.gguf", Arch: "llama", Params: 1000, Bytes: 2000, Type: "Q8_0", Layers: 2, DecodeBytes: 1500},
		Machine:  Machine{GOOS: "linux", GOARCH: "amd64", CPUs: 2, GoVersion: "go1.26", Kernels: "asm", ReadCeiling: []Ceiling{{Threads: 1, GBPerSec: 20, Bytes: 1 << 28, WindowBytes: 1 << 25, Windows: 64, Load: 1}}},
		Settings: Settings{Prompt: 8, Gen: 4, Depths: []int{0, 16}, Reps: 2, Threads: []int{1, 2}, RefThreads: 1, Seed: 1, Sanity: true},
		Results: []Result{
			{Engine: "qnnprep", Test: "pp8", Kind: "pp", Tokens: 8, Depth: 0, Threads: 1, TokensPerSec: 100, Stddev: 2, Samples: []float64{98, 102}, Load: 1, Sane: &yes, VsLlama: 0.5},
			{Engine: "llama.cpp", Test: "pp8", Kind: "pp", Tokens: 8, Depth: 0, Threads: 1, TokensPerSec: 200, Stddev: 2, Samples: []float64{198, 202}, Load: 1},
			{Engine: "qnnprep", Test: "pp8", Kind: "pp", Tokens: 8, Depth: 16, Threads: 1, TokensPerSec: 80, Stddev: 2, Samples: []float64{78, 82}, Load: 1, Sane: &yes},
			{Engine: "qnnprep", Test: "tg4", Kind: "tg", Tokens: 4, Depth: 0, Threads: 1, TokensPerSec: 20, Stddev: 1, Samples: []float64{19, 21}, Load: 1, Sane: &yes, ReadGBPerSec: 3e-5, ReadFraction: 1.5e-6},
			{Engine: "qnnprep", Test: "tg4", Kind: "tg", Tokens: 4, Depth: 16, Threads: 1, TokensPerSec: 18, Stddev: 1, Samples: []float64{17, 19}, Load: 1, Sane: &yes},
		},
		Speculative: []SpecResult{
			{K: 1, Threads: 1, Depth: 8, Tokens: 4, GreedyTokensPerSec: 20, SpecTokensPerSec: 22, Speedup: 1.1, AcceptanceLength: 0.8, AcceptanceRate: 0.8, TargetCallsPerToken: 0.6, Sane: true},
			{K: 2, Threads: 1, Depth: 8, Tokens: 4, GreedyTokensPerSec: 20, SpecTokensPerSec: 26, Speedup: 1.3, AcceptanceLength: 1.5, AcceptanceRate: 0.75, TargetCallsPerToken: 0.4, Sane: true},
		},
		PeakRSS: 1 << 20, Seconds: 1, Sane: true,
	}
}

func TestPlot(t *testing.T) {
	rep := fakeReport()
	rep.Machine.CPU, rep.Machine.Kernels = "AMD EPYC 9R14", "avx512"
	rep.Results[1].Peer, rep.Results[1].Backend = peers.LlamaBenchBin, "CPU zen4"
	s := NewSuite([]*Report{rep}, nil)
	var b bytes.Buffer
	if err := Plot(&b, "png", s); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if w := img.Bounds().Dx(); w < 1000 {
		t.Errorf("PNG width %d, want three readable panels", w)
	}
	b.Reset()
	if err := Plot(&b, "svg", s); err != nil {
		t.Fatal(err)
	}
	// The header names the machine, qnnprep's kernels and llama.cpp's
	// backend; the panels, the ratio (each bar's value written), the read
	// share, the speculative speed-up and tokens/s by depth per model.
	for _, label := range []string{"tokens/s", "depth (tokens before the test)", "K (draft tokens per window)", "speed-up over greedy",
		"qnnprep ÷ llama.cpp", ">0.50<", "weights read ÷ memory-read ceiling", "pp8, 1 thread", "tg4, 1 thread", "llama.cpp",
		"AMD EPYC 9R14 · qnnprep kernels avx512 · llama.cpp llama-bench, CPU zen4"} {
		if !strings.Contains(b.String(), label) {
			t.Errorf("SVG lacks %q", label)
		}
	}
	dir := t.TempDir()
	for _, name := range []string{"p.svg", "p.png"} {
		if err := WritePlot(filepath.Join(dir, name), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := WritePlot(filepath.Join(dir, "p.gif"), s); err == nil {
		t.Error("gif: no error")
	}
	if err := Plot(&b, "svg", NewSuite(nil, nil)); err == nil {
		t.Error("empty suite: no error")
	}
}

func TestConvertSmall(t *testing.T) {
	p := smallModel(t, gguf.F16)
	for _, recipe := range []string{"q8_0", "q1"} {
		c, err := Convert(context.Background(), p, ConvertOptions{Recipe: recipe, Dir: t.TempDir(), Scratch: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if c.SourceBytes <= 0 || c.OutputBytes <= 0 || c.OutputBytes >= c.SourceBytes || c.SourceGBPerSec <= 0 || c.OutputGBPerSec <= 0 || c.PeakRSS <= 0 {
			t.Errorf("%s: %+v", recipe, c)
		}
		if c.SourceCached < 0 || c.SourceCached > 1 {
			t.Errorf("%s: source cached %g", recipe, c.SourceCached)
		}
		var names []string
		for _, s := range c.Stages {
			names = append(names, s.Name)
			if s.Seconds <= 0 || s.GBPerSec <= 0 || s.Bytes <= 0 {
				t.Errorf("%s: stage %+v", recipe, s)
			}
		}
		if got := strings.Join(names, ","); got != "read,quantize,write,pipeline" {
			t.Errorf("%s: stages %s", recipe, got)
		}
		s := NewSuite(nil, []*ConvertReport{c})
		if err := validate(t, compileSchema(t), suiteJSON(t, s)); err != nil {
			t.Errorf("%s: JSON does not validate: %v", recipe, err)
		}
		var tb bytes.Buffer
		if err := s.WriteTable(&tb); err != nil || !strings.Contains(tb.String(), "| "+recipe+" | quantize |") {
			t.Errorf("%s: table %v:\n%s", recipe, err, tb.String())
		}
	}
	if _, err := Convert(context.Background(), p, ConvertOptions{Recipe: "nope"}); err == nil {
		t.Error("unknown recipe: no error")
	}
}

func TestReadSuites(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	var buf bytes.Buffer
	if err := NewSuite([]*Report{fakeReport()}, nil).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ReadSuites(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Reports) != 2 || len(s.Reports[1].Results) != 5 {
		t.Fatalf("merged %d reports", len(s.Reports))
	}
	bad := filepath.Join(dir, "bad.json")
	for _, doc := range []string{`{"schema":"x","reports":[],"conversions":[]}`, `{"schema":"` + SchemaID + `","reports":[],"conversions":[],"x":1}`, `[`} {
		os.WriteFile(bad, []byte(doc), 0o644)
		if _, err := ReadSuites(bad); err == nil || !strings.Contains(err.Error(), "bad.json") {
			t.Errorf("%s: error %v", doc, err)
		}
	}
}

// TestCommittedResults: the measured results kept for the README
// (testdata/700m, testdata/700m-avx512) still decode strictly and
// validate against the schema.
func TestCommittedResults(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if len(files) == 0 {
		t.Skip("no committed results")
	}
	s := compileSchema(t)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeSuite(b, f); err != nil {
			t.Error(err)
		}
		if err := validate(t, s, b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestSchemaPeer: llama.cpp rows may name their peer, qnnprep rows may not,
// and rows without it (reports written before it) still validate.
func TestSchemaPeer(t *testing.T) {
	s := compileSchema(t)
	for _, tc := range []struct {
		row  int
		peer string
		ok   bool
	}{
		{1, "", true},
		{1, peers.LlamaBenchBin, true},
		{1, peers.NodeLlamaCpp, true},
		{1, "llamafile", false},
		{0, peers.LlamaBenchBin, false},
	} {
		rep := fakeReport()
		rep.Results[tc.row].Peer = tc.peer
		err := validate(t, s, suiteJSON(t, NewSuite([]*Report{rep}, nil)))
		if (err == nil) != tc.ok {
			t.Errorf("row %d (%s) with peer %q: validation error %v, want ok %v", tc.row, rep.Results[tc.row].Engine, tc.peer, err, tc.ok)
		}
	}
	// Only llama.cpp rows name a backend.
	for _, tc := range []struct {
		row int
		ok  bool
	}{{1, true}, {0, false}} {
		rep := fakeReport()
		rep.Results[tc.row].Backend = "CPU zen4"
		if err := validate(t, s, suiteJSON(t, NewSuite([]*Report{rep}, nil))); (err == nil) != tc.ok {
			t.Errorf("row %d with a backend: validation error %v, want ok %v", tc.row, err, tc.ok)
		}
	}
	rep := fakeReport()
	rep.Results[1].Peer = peers.LlamaBenchBin
	var tb bytes.Buffer
	if err := NewSuite([]*Report{rep}, nil).WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "| llama.cpp (llama-bench) |") || !strings.Contains(tb.String(), "| qnnprep |") {
		t.Errorf("table:\n%s", tb.String())
	}
	// The table and CSV name the CPU, qnnprep's kernels and llama.cpp's
	// backend, so ratios from different machines are not mixed up.
	rep.Results[1].Backend = "CPU zen4"
	rep.Machine.CPU, rep.Machine.Kernels = "AMD EPYC", "avx2"
	s2 := NewSuite([]*Report{rep}, nil)
	tb.Reset()
	if err := s2.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| llama.cpp (llama-bench, CPU zen4) |", "qnnprep kernels avx2, 2 CPUs (AMD EPYC)"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	rows, col := suiteCSV(t, s2)
	if r := rows[2]; r[col["backend"]] != "CPU zen4" || r[col["cpu"]] != "AMD EPYC" || r[col["kernels"]] != "" {
		t.Errorf("llama.cpp CSV row %q", r)
	}
	if r := rows[1]; r[col["backend"]] != "" || r[col["cpu"]] != "AMD EPYC" || r[col["kernels"]] != "avx2" {
		t.Errorf("qnnprep CSV row %q", r)
	}
}

// TestRunLlamaPeers times llama.cpp beside qnnprep on a small synthetic
// model with each peer and checks the rows name it.
func TestRunLlamaPeers(t *testing.T) {
	p := smallModel(t, gguf.Q8_0)
	opt := Options{Prompt: 8, Gen: 4, Depths: []int{0, 8}, Reps: 2, Threads: []int{1}, NoSanity: true, Llama: true}
	for _, tc := range []struct{ flag, peer string }{
		{LlamaPeerBench, peers.LlamaBenchBin},
		{LlamaPeerNode, peers.NodeLlamaCpp},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			testkit.Need(t, tc.peer)
			o := opt
			o.LlamaPeer = tc.flag
			rep, err := Run(context.Background(), p, o)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range rep.Results {
				switch r.Engine {
				case "llama.cpp":
					n++
					if r.Peer != tc.peer || len(r.Samples) != 2 || !(r.TokensPerSec > 0) || r.PeakRSS <= 0 {
						t.Errorf("llama.cpp %s depth %d: peer %q, samples %v, rss %d", r.Test, r.Depth, r.Peer, r.Samples, r.PeakRSS)
					}
					// llama-bench logs the CPU backend variant it loaded.
					if tc.peer == peers.LlamaBenchBin && !strings.HasPrefix(r.Backend, "CPU ") {
						t.Errorf("llama.cpp %s depth %d: backend %q, want the CPU variant", r.Test, r.Depth, r.Backend)
					}
					if (r.Kind == "tg") != (r.ReadFraction > 0) {
						t.Errorf("llama.cpp %s depth %d: read fraction %g (tg rows only)", r.Test, r.Depth, r.ReadFraction)
					}
				case "qnnprep":
					if r.Peer != "" || !(r.VsLlama > 0) {
						t.Errorf("qnnprep %s depth %d: peer %q, vs llama.cpp %g", r.Test, r.Depth, r.Peer, r.VsLlama)
					}
				}
			}
			if n != 4 {
				t.Errorf("%d llama.cpp rows, want 4", n)
			}
			s := NewSuite([]*Report{rep}, nil)
			tb := validTable(t, s)
			if !strings.Contains(tb.String(), "| llama.cpp ("+tc.peer) {
				t.Errorf("table:\n%s", tb.String())
			}
		})
	}
}

// TestLlamaPeerMissing: asking for llama-bench when it is not there fails
// before anything is timed; auto falls back to node-llama-cpp.
func TestLlamaPeerMissing(t *testing.T) {
	p := smallModel(t, gguf.Q8_0)
	t.Setenv(peers.EnvLlamaBench, filepath.Join(t.TempDir(), "no-llama-bench"))
	opt := Options{Prompt: 4, Gen: 2, Reps: 1, Threads: []int{1}, NoSanity: true, Llama: true, LlamaPeer: LlamaPeerBench}
	_, err := Run(context.Background(), p, opt)
	if err == nil || !strings.Contains(err.Error(), "llama-bench not installed") {
		t.Errorf("--llama-peer llama-bench without it: %v", err)
	}
	testkit.Need(t, peers.NodeLlamaCpp)
	opt.LlamaPeer = LlamaPeerAuto
	got, err := opt.llamaPeer()
	if err != nil || got != peers.NodeLlamaCpp {
		t.Errorf("auto without llama-bench: %q, %v", got, err)
	}
}

// TestLlamaPeerFails: a llama-bench that fails or hangs past the timeout
// leaves llama.cpp rows that say so, and everything qnnprep measured is
// still reported, in every output. After a timeout the peer's remaining
// runs are not started; after a failure they are.
func TestLlamaPeerFails(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("the fake llama-bench is a shell script")
	}
	fake, err := filepath.Abs("testdata/fake-llama-bench.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(peers.EnvLlamaBench, fake)
	p := smallModel(t, gguf.Q8_0)
	for _, tc := range []struct {
		mode     string
		runs     int    // llama-bench runs started
		speed    string // the table's t/s column of the first llama.cpp row
		reason   string
		timedOut bool
	}{
		{"hang", 1, "TIMED OUT", "timed out after 300ms", true},
		{"fail", 4, "FAILED", "failed to load model (fake llama-bench)", false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "runs")
			t.Setenv("QNNPREP_FAKE_LLAMA_BENCH", tc.mode)
			t.Setenv("QNNPREP_FAKE_LLAMA_BENCH_LOG", log)
			opt := Options{Prompt: 4, Gen: 2, Depths: []int{0, 4}, Reps: 1, Threads: []int{1, 2}, Llama: true, LlamaPeer: LlamaPeerBench,
				LlamaTimeout: 300 * time.Millisecond}
			rep, err := Run(context.Background(), p, opt)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(log)
			if n := strings.Count(string(b), "\n"); n != tc.runs {
				t.Errorf("llama-bench started %d times, want %d", n, tc.runs)
			}
			var measured, failed int
			for _, r := range rep.Results {
				switch {
				case r.Engine == "qnnprep" && r.TokensPerSec > 0 && r.Error == "" && r.VsLlama == 0:
					measured++
				case r.Engine == "llama.cpp" && r.Error != "" && len(r.Samples) == 0 && r.TokensPerSec == 0 && r.ReadFraction == 0:
					failed++
					// The first run (depth 0, 1 thread) gives two rows.
					if first := r.Depth == 0 && r.Threads == 1; first && (r.TimedOut != tc.timedOut || !strings.Contains(r.Error, tc.reason)) ||
						!first && tc.timedOut && (r.TimedOut || !strings.HasPrefix(r.Error, "not run: llama.cpp timed out at depth 0 with 1 threads")) ||
						!first && !tc.timedOut && !strings.Contains(r.Error, tc.reason) {
						t.Errorf("llama.cpp %s depth %d, %d threads: timed out %v, error %q", r.Test, r.Depth, r.Threads, r.TimedOut, r.Error)
					}
				default:
					t.Errorf("unexpected row %+v", r)
				}
			}
			if measured != 8 || failed != 8 {
				t.Errorf("%d qnnprep rows measured, %d llama.cpp rows failed; want 8 and 8", measured, failed)
			}
			s := NewSuite([]*Report{rep}, nil)
			if bad := s.PeerFailures(); len(bad) != 8 {
				t.Errorf("PeerFailures: %d rows, want 8", len(bad))
			}
			js := suiteJSON(t, s)
			if err := validate(t, compileSchema(t), js); err != nil {
				t.Errorf("JSON does not validate: %v", err)
			}
			back, err := decodeSuite(js, "results.json")
			if err != nil || back.Reports[0].Results[4].Error == "" {
				t.Errorf("JSON does not read back with its errors: %v", err)
			}
			var tb, cb, pb bytes.Buffer
			if err := s.WriteTable(&tb); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(tb.String(), "| "+tc.speed+" |") || !strings.Contains(tb.String(), tc.reason) {
				t.Errorf("table lacks %q and the reason %q:\n%s", tc.speed, tc.reason, tb.String())
			}
			if err := s.WriteCSV(&cb); err != nil {
				t.Fatal(err)
			}
			rows, err := csv.NewReader(&cb).ReadAll()
			if err != nil || len(rows) != 17 || rows[0][len(rows[0])-1] != "error" || rows[5][2] != "llama.cpp" || !strings.Contains(rows[5][len(rows[5])-1], tc.reason) {
				t.Errorf("CSV (%v): %q", err, rows)
			}
			if err := Plot(&pb, "svg", s); err != nil {
				t.Fatal(err)
			}
			if want := "llama-bench " + strings.ToLower(tc.speed); !strings.Contains(pb.String(), want) {
				t.Errorf("plot header lacks %q", want)
			}
		})
	}
}

// TestCPUMask: a GODEBUG that hides instruction sets from the kernels is
// recorded beside the kernel set it chose.
func TestCPUMask(t *testing.T) {
	for _, tc := range []struct{ godebug, mask, label string }{
		{"", "", "avx2"},
		{"madvdontneed=1", "", "avx2"},
		{"cpu.avx512f=off", "cpu.avx512f=off", "avx2 (GODEBUG cpu.avx512f=off)"},
		{"gctrace=1, cpu.avx512f=off,cpu.avx2=on", "cpu.avx512f=off,cpu.avx2=on", "avx2 (GODEBUG cpu.avx512f=off,cpu.avx2=on)"},
	} {
		m := Machine{Kernels: "avx2", CPUMask: cpuMask(tc.godebug)}
		if m.CPUMask != tc.mask || kernelsLabel(m) != tc.label {
			t.Errorf("GODEBUG %q: mask %q, label %q; want %q, %q", tc.godebug, m.CPUMask, kernelsLabel(m), tc.mask, tc.label)
		}
	}
	opt := Options{Prompt: 4, LlamaCPU: "../haswell", Llama: true}
	if err := opt.resolve(); err == nil {
		t.Error("CPU variant ../haswell: no error")
	}
	// Only llama-bench can be offered one CPU variant.
	testkit.Need(t, peers.NodeLlamaCpp)
	opt = Options{Prompt: 4, Reps: 1, Llama: true, LlamaPeer: LlamaPeerNode, LlamaCPU: "haswell"}
	if _, err := opt.newLlamaRunner(); err == nil || !strings.Contains(err.Error(), "only llama-bench") {
		t.Errorf("CPU variant with node-llama-cpp: %v", err)
	}
}
