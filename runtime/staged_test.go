package runtime

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// stagedConfig is synth's preset of arch with the given number of layers
// (hybrids keep three DeltaNet layers per attention layer).
func stagedConfig(arch model.Arch, layers int) model.Config {
	c := synth.Config(arch, false)
	c.Layers = layers
	c.LayerKinds = make([]model.LayerKind, layers)
	if c.SSMKeyHeads > 0 {
		c.Heads, c.KVHeads = 4, 2
		for i := range c.LayerKinds {
			if (i+1)%4 != 0 {
				c.LayerKinds[i] = model.DeltaNet
			}
		}
	}
	return c
}

func synthModel(t testing.TB, c model.Config, seed uint64) *model.Model {
	t.Helper()
	m, err := synth.Model(c, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func planFor(t testing.TB, m *model.Model, o shard.Options) *shard.Plan {
	t.Helper()
	p, err := shard.PlanModel(m, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newStaged(t testing.TB, e *Engine, p *shard.Plan) *Staged {
	t.Helper()
	s, err := NewStaged(e, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// maxRel is the largest |a−b| over a row, relative to the row's largest
// |b|, over all rows.
func maxRel(a, b [][]float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var worst float64
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return math.Inf(1)
		}
		var scale, d float64
		for j := range b[i] {
			scale = max(scale, math.Abs(float64(b[i][j])))
			d = max(d, math.Abs(float64(a[i][j])-float64(b[i][j])))
			if math.IsNaN(float64(a[i][j])) {
				return math.Inf(1)
			}
		}
		worst = max(worst, d/max(scale, 1e-30))
	}
	return worst
}

func bitEqualRows(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if sameBits(a[i], b[i]) != nil {
			return false
		}
	}
	return true
}

// TestStagedMatchesWhole decodes llama, qwen3 and the qwen35 hybrid
// through plans of one, two and uneven layer counts per stage, AR 1, 4 and
// 32 and a mixed set, CL 64 and 256, and requires the whole-model greedy ids and teacher-forced logits
// (within 1e-5 relative; the executor is in fact bit-exact). The surfaces
// left in past_*_in afterwards must equal the whole model's caches.
func TestStagedMatchesWhole(t *testing.T) {
	const promptLen, gen = 8, 16
	ctx := context.Background()
	splits := []struct {
		name string
		o    func(layers int) shard.Options
	}{
		{"1-per-stage", func(int) shard.Options { return shard.Options{LayersPerStage: 1} }},
		{"2-per-stage", func(int) shard.Options { return shard.Options{LayersPerStage: 2} }},
		{"uneven", func(int) shard.Options { return shard.Options{Stages: 2} }},
	}
	ars := [][]int{{1}, {4}, {32}, {32, 4, 1}}
	worst := 0.0
	exact := true
	for _, arch := range []model.Arch{model.Llama, model.Qwen3, model.Qwen35} {
		layers := 5
		if arch.Features().DeltaNet {
			layers = 7 // D D D A D D D: stages without attention; "uneven" is 4 + 3
		}
		m := synthModel(t, stagedConfig(arch, layers), 5)
		e := newEngine(t, m, Options{Threads: 1})
		prompt := randomTokens(promptLen, m.Config.VocabSize, 3)
		want, err := e.Greedy(ctx, prompt, gen)
		if err != nil {
			t.Fatal(err)
		}
		seq := append(slices.Clone(prompt), want...)
		wantRows, err := e.Logits(ctx, seq[:len(seq)-1])
		if err != nil {
			t.Fatal(err)
		}
		wantRows = wantRows[promptLen-1:]
		whole := e.NewState()
		if _, err := whole.Forward(seq[:len(seq)-1]); err != nil {
			t.Fatal(err)
		}
		for _, sp := range splits {
			for _, ar := range ars {
				for _, cl := range []int{64, 256} {
					o := sp.o(layers)
					o.AR, o.CL = ar, []int{cl}
					name := fmt.Sprintf("%s/%s/ar%v/cl%d", arch, sp.name, ar, cl)
					t.Run(name, func(t *testing.T) {
						p := planFor(t, m, o)
						s := newStaged(t, e, p)
						got, err := s.Greedy(ctx, prompt, gen)
						if err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(got, want) {
							t.Fatalf("staged %v\nwhole  %v", got, want)
						}
						checkSurfaces(t, s, whole, m.Config)
						if ar[0] == 32 && len(ar) == 3 {
							// Genie's strategy: the prompt on AR 32, steps on AR 1.
							c := s.Calls()
							if len(c) != 2 || c[0].AR != 1 || c[1].AR != 32 || c[1].Calls != 1 {
								t.Errorf("calls %+v, want one AR-32 call and AR-1 steps", c)
							}
						}
						rows, err := s.TeacherForced(ctx, prompt, want)
						if err != nil {
							t.Fatal(err)
						}
						r := maxRel(rows, wantRows)
						worst = max(worst, r)
						exact = exact && bitEqualRows(rows, wantRows)
						if r > 1e-5 {
							t.Fatalf("logits differ by %.3g relative", r)
						}
					})
				}
			}
		}
	}
	t.Logf("largest relative logit difference staged vs whole: %.3g (bit-identical: %v)", worst, exact)
}

// checkSurfaces compares the cache the KV manager left in the current
// variant's past_*_in tensors with the whole-model State's (which holds the
// same tokens but the last generated one).
func checkSurfaces(t *testing.T, s *Staged, whole *State, c model.Config) {
	t.Helper()
	v := s.kv
	if v == nil {
		t.Fatal("no KV variant in use")
	}
	if s.nValid != whole.Len() {
		t.Fatalf("n_valid_kv %d, whole state holds %d", s.nValid, whole.Len())
	}
	nkv, d := c.KVHeads, c.HeadDim
	past := v.cl - v.ar
	for l, kind := range c.LayerKinds {
		if kind == model.DeltaNet {
			conv, ssm := whole.DeltaNet(l)
			tr := make([]float32, len(conv))
			convToPlan(tr, conv, &c)
			if err := sameBits(s.Surface(v.ar, v.cl, shard.PastConv(l, "in")), tr); err != nil {
				t.Fatalf("%s: %v", shard.PastConv(l, "in"), err)
			}
			if err := sameBits(s.Surface(v.ar, v.cl, shard.PastSSM(l, "in")), ssm); err != nil {
				t.Fatalf("%s: %v", shard.PastSSM(l, "in"), err)
			}
			continue
		}
		k, vv := whole.KV(l)
		ki, vi := s.Surface(v.ar, v.cl, shard.PastKey(l, "in")), s.Surface(v.ar, v.cl, shard.PastValue(l, "in"))
		for j := 0; j < s.nValid; j++ {
			for h := 0; h < nkv; h++ {
				for i := 0; i < d; i++ {
					if ki[(h*d+i)*past+j] != k[j*nkv*d+h*d+i] {
						t.Fatalf("%s[%d][0][%d][%d] differs from the whole cache", shard.PastKey(l, "in"), h, i, j)
					}
					if vi[(h*past+j)*d+i] != vv[j*nkv*d+h*d+i] {
						t.Fatalf("%s[%d][0][%d][%d] differs from the whole cache", shard.PastValue(l, "in"), h, j, i)
					}
				}
			}
		}
	}
}

// TestStagedCLSwitch runs a sequence whose prompt fits the small CL's
// cache but whose continuation does not: the KV manager moves the cache to
// the CL-256 variant and decoding goes on exactly as whole. An AR-32-only
// plan pads every step with 31 masked rows.
func TestStagedCLSwitch(t *testing.T) {
	ctx := context.Background()
	for _, arch := range []model.Arch{model.Llama, model.Qwen35} {
		m := synthModel(t, stagedConfig(arch, 4), 9)
		e := newEngine(t, m, Options{Threads: 1})
		prompt := randomTokens(24, m.Config.VocabSize, 4)
		want, err := e.Greedy(ctx, prompt, 48)
		if err != nil {
			t.Fatal(err)
		}
		for _, ar := range [][]int{{32, 4, 1}, {32}} {
			t.Run(fmt.Sprintf("%s/ar%v", arch, ar), func(t *testing.T) {
				p := planFor(t, m, shard.Options{LayersPerStage: 2, AR: ar, CL: []int{64, 256}})
				s := newStaged(t, e, p)
				got, err := s.Greedy(ctx, prompt, 48)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("staged %v\nwhole  %v", got, want)
				}
				var cls []int
				for _, c := range s.Calls() {
					if !slices.Contains(cls, c.CL) {
						cls = append(cls, c.CL)
					}
				}
				if !slices.Equal(cls, []int{64, 256}) {
					t.Errorf("calls %+v: want both CLs used", s.Calls())
				}
			})
		}
	}
}

// errDrafter proposes the true greedy continuation, except that every
// third window's second token is wrong, so some windows are accepted
// whole and others rolled back.
type errDrafter struct {
	seq    []int32 // prompt and greedy continuation
	n      int     // committed tokens (prompt + accepted)
	window int
	vocab  int
}

func (d *errDrafter) FeatureLayers() []int { return nil }
func (d *errDrafter) Start(prompt []int32, _ [][]float32) error {
	d.n = len(prompt)
	return nil
}
func (d *errDrafter) Propose(last int32, k int) ([]int32, error) {
	d.window++
	var out []int32
	for i := 0; i < k && d.n+1+i < len(d.seq); i++ {
		tok := d.seq[d.n+1+i]
		if d.window%3 == 0 && i == 1 {
			tok = (tok + 1) % int32(d.vocab)
		}
		out = append(out, tok)
	}
	return out, nil
}
func (d *errDrafter) Commit(last int32, draft []int32, accepted int, _ [][]float32) error {
	d.n += 1 + accepted
	return nil
}

// TestStagedSpeculative verifies draft windows through the plan (one call
// of k+1 rows, a selection mask keeping the accepted prefix) on llama and
// the qwen35 hybrid, whose DeltaNet state is rolled back from the
// runtime's snapshots: the tokens equal whole greedy decoding.
func TestStagedSpeculative(t *testing.T) {
	ctx := context.Background()
	const n, k = 24, 3
	for _, arch := range []model.Arch{model.Llama, model.Qwen35} {
		m := synthModel(t, stagedConfig(arch, 4), 12)
		e := newEngine(t, m, Options{Threads: 1})
		prompt := randomTokens(6, m.Config.VocabSize, 8)
		want, err := e.Greedy(ctx, prompt, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, ar := range [][]int{{4, 1}, {32}} {
			t.Run(fmt.Sprintf("%s/ar%v", arch, ar), func(t *testing.T) {
				p := planFor(t, m, shard.Options{LayersPerStage: 2, AR: ar, CL: []int{64}})
				s := newStaged(t, e, p)
				d := &errDrafter{seq: append(slices.Clone(prompt), want...), vocab: m.Config.VocabSize}
				got, st, err := s.Speculate(ctx, d, prompt, n, k)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("speculative staged %v\nwhole             %v", got, want)
				}
				if st.Accepted == st.Proposed || st.Accepted == 0 {
					t.Errorf("accepted %d of %d: the test needs both outcomes", st.Accepted, st.Proposed)
				}
			})
		}
	}
}

// TestStagedTree submits a small draft tree (two children of the last
// token, one with a child) in one call: every row's logits equal the
// whole model's for that row's path, and committing one path continues
// exactly like greedy decoding.
func TestStagedTree(t *testing.T) {
	ctx := context.Background()
	m := synthModel(t, stagedConfig(model.Qwen3, 3), 2)
	e := newEngine(t, m, Options{Threads: 1})
	prompt := randomTokens(5, m.Config.VocabSize, 1)
	want, err := e.Greedy(ctx, prompt, 8)
	if err != nil {
		t.Fatal(err)
	}
	p := planFor(t, m, shard.Options{LayersPerStage: 2, AR: []int{8, 1}, CL: []int{64}})
	s := newStaged(t, e, p)
	if _, err := s.Forward(prompt); err != nil {
		t.Fatal(err)
	}
	wrong := (want[1] + 7) % int32(m.Config.VocabSize)
	// rows: want[0]; wrong (child of 0); want[1] (child of 0); want[2] (child of 2)
	tokens := []int32{want[0], wrong, want[1], want[2]}
	rows, err := s.Submit(tokens, []int{-1, 0, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	paths := [][]int32{{want[0]}, {want[0], wrong}, {want[0], want[1]}, {want[0], want[1], want[2]}}
	for i, path := range paths {
		ref, err := e.Logits(ctx, append(slices.Clone(prompt), path...))
		if err != nil {
			t.Fatal(err)
		}
		if err := sameBits(rows[i], ref[len(ref)-1]); err != nil {
			t.Fatalf("tree row %d: %v", i, err)
		}
	}
	if err := s.Commit([]bool{true, true, true, false}); err == nil || !strings.Contains(err.Error(), "not a path") {
		t.Fatalf("committing two siblings: %v", err)
	}
	if err := s.Commit([]bool{true, false, true, true}); err != nil {
		t.Fatal(err)
	}
	got := []int32{want[0], want[1], want[2], Argmax(rows[3])}
	for len(got) < len(want) {
		l, err := s.Forward(got[len(got)-1:])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, Argmax(l))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the tree %v, whole %v", got, want)
	}
}

// TestStagedSSDRegression rebuilds the failing deployment (qnn-genie.md §0;
// shard's TestCheckRegressionSSDArc has the full message check): 32
// layers in 8 stages of 4, ssd-q1 with one branch, CL == AR. The checker
// names the mismatch; the executor hits the same wall Genie did when the
// SSD-sized mask meets an AR-c step. The corrected plan (KV graphs with CL
// > AR, an AR that holds the SSD step, RoPE positions) passes the checker
// and decodes, greedily and with SSD-sized speculative steps, exactly like
// the whole model.
func TestStagedSSDRegression(t *testing.T) {
	ctx := context.Background()
	c := stagedConfig(model.Llama, 32)
	c.Hidden, c.FFN, c.Heads, c.KVHeads, c.HeadDim, c.RopeDim = 32, 32, 2, 1, 16, 16
	m := synthModel(t, c, 32)
	e := newEngine(t, m, Options{Threads: 1})
	ssd := shard.Dialog{Type: shard.SSD, ForecastTokenCount: 1, Branches: []int{1}, ForecastPrefix: 16, ForecastPrefixName: "forecast-prefix"}

	bad := planFor(t, m, shard.Options{LayersPerStage: 4, AR: []int{32}, CL: []int{32}, ARc: true, Dialog: ssd})
	vs := shard.Check(bad, shard.CheckEnv{ProbePromptTokens: 3})
	if len(vs) == 0 || vs[0].Rule != shard.RuleARcMask || !strings.Contains(vs[0].Message, "4 + 19") {
		t.Fatalf("checker on the failing plan: %v", vs)
	}
	// Through the executor: 3 prompt tokens, then a 4-row SSD step. AR-c
	// re-processes the history, so n_process = 4 + 3 (no forecast prefix
	// here) and a 4-entry selection mask is refused as Genie refuses it.
	sb := newStaged(t, e, bad)
	prompt := randomTokens(3, c.VocabSize, 6)
	if _, err := sb.Forward(prompt); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Submit([]int32{1, 2, 3, 4}, nil); err != nil {
		t.Fatal(err)
	}
	err := sb.Commit(make([]bool, 4))
	if err == nil || !strings.Contains(err.Error(), "Found 4 but expected 0 or 7") {
		t.Fatalf("4-entry mask on an AR-c step: %v", err)
	}

	good := planFor(t, m, shard.Options{LayersPerStage: 4, AR: []int{32, 4, 1}, CL: []int{64}, Dialog: ssd})
	if vs := shard.Check(good, shard.CheckEnv{ProbePromptTokens: 3}); len(vs) != 0 {
		t.Fatalf("corrected plan: %v", vs)
	}
	step := good.Dialog.StepTokens
	var sv *shard.Variant
	for i := range good.Variants {
		if v := &good.Variants[i]; v.MaskLen > 0 {
			sv = v
		}
	}
	if sv == nil || sv.MaskLen != step || sv.NProcess != step || sv.AR != 4 || sv.Mode != shard.ModeKV {
		t.Fatalf("corrected plan's speculative variant %+v, step %d", sv, step)
	}
	const n = 20
	prompt = randomTokens(12, c.VocabSize, 7)
	want, err := e.Greedy(ctx, prompt, n)
	if err != nil {
		t.Fatal(err)
	}
	s := newStaged(t, e, good)
	got, err := s.Greedy(ctx, prompt, n)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("corrected plan staged %v\nwhole %v", got, want)
	}
	// SSD-sized steps: [last + 3 drafts] = 4 rows on AR 4, committed with
	// a mask of mask_len = n_process = 4 entries.
	d := &errDrafter{seq: append(slices.Clone(prompt), want...), vocab: c.VocabSize}
	spec, _, err := s.Speculate(ctx, d, prompt, n, step-1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec, want) {
		t.Fatalf("corrected plan speculative %v\nwhole %v", spec, want)
	}
	for _, cc := range s.Calls() {
		if cc.AR != 4 && cc.AR != 32 {
			t.Errorf("speculative decode used AR %d: %+v", cc.AR, s.Calls())
		}
	}
}

// TestStagedAbsolute covers plans with absolute position_ids.
func TestStagedAbsolute(t *testing.T) {
	ctx := context.Background()
	m := synthModel(t, stagedConfig(model.Llama, 3), 4)
	e := newEngine(t, m, Options{Threads: 1})
	prompt := randomTokens(6, m.Config.VocabSize, 2)
	want, err := e.Greedy(ctx, prompt, 10)
	if err != nil {
		t.Fatal(err)
	}
	p := planFor(t, m, shard.Options{LayersPerStage: 2, AR: []int{4, 1}, CL: []int{32}, Positional: shard.Absolute})
	got, err := newStaged(t, e, p).Greedy(ctx, prompt, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("staged %v, whole %v", got, want)
	}
}

// TestStagedErrors: bad plans and bad requests are errors that say what
// is wrong.
func TestStagedErrors(t *testing.T) {
	ctx := context.Background()
	ml := synthModel(t, stagedConfig(model.Llama, 3), 1)
	mq := synthModel(t, stagedConfig(model.Qwen3, 3), 1)
	el := newEngine(t, ml, Options{Threads: 1})
	pl := func(o shard.Options) *shard.Plan { return planFor(t, ml, o) }
	base := shard.Options{LayersPerStage: 2, AR: []int{4, 1}, CL: []int{32}}

	construct := []struct {
		name string
		e    *Engine
		p    func() *shard.Plan
		want string
	}{
		{"other model", el, func() *shard.Plan { return planFor(t, mq, base) }, `arch "qwen3" (model "llama")`},
		{"other layers", el, func() *shard.Plan {
			return planFor(t, synthModel(t, stagedConfig(model.Llama, 4), 1), base)
		}, "layers 4 (model 3)"},
		{"CL beyond context", newEngine(t, ml, Options{Threads: 1, Context: 16}), func() *shard.Plan { return pl(base) }, "CL 32 exceeds the engine's context length 16"},
		{"missing input", el, func() *shard.Plan {
			p := pl(base)
			g := &p.Graphs[1]
			g.Inputs = slices.DeleteFunc(g.Inputs, func(t shard.Tensor) bool { return t.Name == shard.PastKey(2, "in") })
			return p
		}, `lacks input "past_key_2_in"`},
		{"wrong shape", el, func() *shard.Plan {
			p := pl(base)
			p.Graphs[0].Inputs[0].Shape = []int64{1, 5}
			return p
		}, `input "input_ids" has shape [1 5], model`},
		{"unknown tensor", el, func() *shard.Plan {
			p := pl(base)
			p.Graphs[0].Outputs = append(p.Graphs[0].Outputs, shard.Tensor{Name: "cache_index", Shape: []int64{1}, DType: shard.Int32})
			return p
		}, `output "cache_index" is not a surface`},
		{"missing graph", el, func() *shard.Plan {
			p := pl(base)
			p.Graphs = p.Graphs[1:]
			return p
		}, "no graph for stage 0 of AR 4 CL 32"},
		{"stages with a gap", el, func() *shard.Plan {
			p := pl(base)
			p.Stages[1].FirstLayer = 3
			return p
		}, "stage 1 covers layers 3–2"},
	}
	for _, tc := range construct {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewStaged(tc.e, tc.p())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}

	s := newStaged(t, el, pl(base))
	prompt := randomTokens(6, ml.Config.VocabSize, 1)
	if _, err := s.Greedy(ctx, prompt, 40); err == nil || !strings.Contains(err.Error(), "32 tokens (31 committed + 1 new) do not fit any variant: the largest cache, CL 32 on AR 1, keeps 31 entries") {
		t.Errorf("tokens beyond CL: %v", err)
	}
	if _, err := s.Submit(randomTokens(5, ml.Config.VocabSize, 2), nil); err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("speculative step larger than every AR: %v", err)
	}
	s.Reset()
	if _, err := s.Forward([]int32{1, int32(ml.Config.VocabSize)}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("token outside the vocabulary: %v", err)
	}
	if err := s.Commit(nil); err == nil || !strings.Contains(err.Error(), "without a processed step") {
		t.Errorf("commit without a step: %v", err)
	}
	if _, err := s.Submit([]int32{1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward([]int32{3}); err == nil || !strings.Contains(err.Error(), "not committed") {
		t.Errorf("forward over an uncommitted step: %v", err)
	}
	if err := s.Commit([]bool{true}); err == nil || !strings.Contains(err.Error(), "Found 1 but expected 0 or 2") {
		t.Errorf("short selection mask: %v", err)
	}
	if err := s.Commit([]bool{false, true}); err == nil || !strings.Contains(err.Error(), "not a path") {
		t.Errorf("selection skipping the root: %v", err)
	}

	// A stage given a mask value that is neither visible nor masked.
	s.Reset()
	v := s.vars[1] // AR 4
	s.use(v)
	s.fill(v, []int32{1, 2}, []int{-1, 0}, []int32{0, 1}, 0)
	v.f(shard.AttentionMask)[0] = -1
	if err := s.runStage(v, 0); err == nil || !strings.Contains(err.Error(), "attention_mask[0][0] = -1") {
		t.Errorf("fractional mask: %v", err)
	}
	s.fill(v, []int32{1, 2}, []int{-1, 0}, []int32{0, 1}, 0)
	v.f(shard.PositionIDsCos)[0] = 0.5
	if err := s.runStage(v, 0); err == nil || !strings.Contains(err.Error(), "row 0 of position_ids_cos/position_ids_sin is not the RoPE table") {
		t.Errorf("bad rope row: %v", err)
	}

	// The hybrid cannot keep a branch of a tree.
	mh := synthModel(t, stagedConfig(model.Qwen35, 4), 1)
	eh := newEngine(t, mh, Options{Threads: 1})
	sh := newStaged(t, eh, planFor(t, mh, shard.Options{LayersPerStage: 2, AR: []int{4, 1}, CL: []int{32}}))
	if _, err := sh.Forward([]int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Submit([]int32{4, 5, 6}, []int{-1, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if err := sh.Commit([]bool{true, false, true}); err == nil || !strings.Contains(err.Error(), shard.RuleGDNSpec) {
		t.Errorf("hybrid tree branch: %v", err)
	}
}

// TestStagedARc decodes through AR-c graphs (CL == AR, no past inputs:
// every call re-processes the token history, DeltaNet state from zero),
// alone and mixed with KV graphs: there the executor stays on the AR-c
// graph of CL 8 while the history fits it, then moves to the KV graphs of
// CL 64, re-processing the history (one AR-8 call) before AR-1 steps.
// The tokens equal whole decoding.
func TestStagedARc(t *testing.T) {
	ctx := context.Background()
	for _, arch := range []model.Arch{model.Llama, model.Qwen35} {
		m := synthModel(t, stagedConfig(arch, 4), 21)
		e := newEngine(t, m, Options{Threads: 1})
		prompt := randomTokens(6, m.Config.VocabSize, 5)
		want, err := e.Greedy(ctx, prompt, 12)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			ar, cl []int
			modes  []string
		}{
			{[]int{24}, []int{24}, []string{"AR 24 CL 24"}},
			{[]int{8, 1}, []int{8, 64}, []string{"AR 8 CL 8", "AR 1 CL 64", "AR 8 CL 64"}},
		} {
			t.Run(fmt.Sprintf("%s/ar%v/cl%v", arch, tc.ar, tc.cl), func(t *testing.T) {
				p := planFor(t, m, shard.Options{LayersPerStage: 2, AR: tc.ar, CL: tc.cl, ARc: true})
				s := newStaged(t, e, p)
				got, err := s.Greedy(ctx, prompt, 12)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("staged %v\nwhole  %v", got, want)
				}
				var used []string
				for _, c := range s.Calls() {
					used = append(used, fmt.Sprintf("AR %d CL %d", c.AR, c.CL))
				}
				if !slices.Equal(used, tc.modes) {
					t.Errorf("variants used %v, want %v", used, tc.modes)
				}
			})
		}
	}
}

// TestStagedQuantizedKVF16: quantized weights (Q8_0 activations rounding
// inside every stage) and llama.cpp's F16 KV arithmetic decode through the
// plan exactly like the whole model.
func TestStagedQuantizedKVF16(t *testing.T) {
	ctx := context.Background()
	for _, arch := range []model.Arch{model.Qwen3, model.Qwen35} {
		m := tinyModel(t, synth.Config(arch, false), gguf.Q8_0, 3)
		for _, kvf16 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/kvf16=%v", arch, kvf16), func(t *testing.T) {
				e := newEngine(t, m, Options{Threads: 2, KVF16: kvf16})
				prompt := randomTokens(7, m.Config.VocabSize, 9)
				want, err := e.Greedy(ctx, prompt, 16)
				if err != nil {
					t.Fatal(err)
				}
				p := planFor(t, m, shard.Options{Stages: 2, AR: []int{4, 1}, CL: []int{32}})
				got, err := newStaged(t, e, p).Greedy(ctx, prompt, 16)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("staged %v\nwhole  %v", got, want)
				}
			})
		}
	}
}

// BenchmarkStaged compares greedy decoding whole and through a two-stage
// plan (AR 32 for the prompt, AR 1 steps, CL 256) on a small synthetic
// qwen3: the cost of the surfaces (KV copies, masks, RoPE tables).
func BenchmarkStaged(b *testing.B) {
	ctx := context.Background()
	c := stagedConfig(model.Qwen3, 4)
	m := synthModel(b, c, 1)
	e := newEngine(b, m, Options{Threads: 1})
	prompt := randomTokens(32, c.VocabSize, 1)
	p := planFor(b, m, shard.Options{Stages: 2, AR: []int{32, 1}, CL: []int{256}})
	s := newStaged(b, e, p)
	const n = 64
	for _, mode := range []string{"whole", "staged"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				var err error
				if mode == "whole" {
					_, err = e.Greedy(ctx, prompt, n)
				} else {
					_, err = s.Greedy(ctx, prompt, n)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// TestStagedTruncate rewinds a staged sequence and decodes a different
// continuation: the logits equal a fresh whole-model run of that sequence.
// Hybrids can rewind only to the start.
func TestStagedTruncate(t *testing.T) {
	ctx := context.Background()
	m := synthModel(t, stagedConfig(model.Llama, 3), 14)
	e := newEngine(t, m, Options{Threads: 1})
	p := planFor(t, m, shard.Options{LayersPerStage: 2, AR: []int{4, 1}, CL: []int{32}})
	s := newStaged(t, e, p)
	a := randomTokens(10, m.Config.VocabSize, 1)
	b := randomTokens(5, m.Config.VocabSize, 2)
	if _, err := s.Forward(a); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(6); err != nil {
		t.Fatal(err)
	}
	got, err := s.ForwardAll(b)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := e.Logits(ctx, append(slices.Clone(a[:6]), b...))
	if err != nil {
		t.Fatal(err)
	}
	if !bitEqualRows(got, ref[6:]) || s.Len() != 11 || s.ValidKV() != 11 {
		t.Fatalf("after truncate: logits differ from whole (len %d, n_valid_kv %d)", s.Len(), s.ValidKV())
	}
	if err := s.Truncate(12); err == nil {
		t.Error("truncate beyond the sequence accepted")
	}

	mh := synthModel(t, stagedConfig(model.Qwen35, 4), 14)
	eh := newEngine(t, mh, Options{Threads: 1})
	sh := newStaged(t, eh, planFor(t, mh, shard.Options{LayersPerStage: 2, AR: []int{4, 1}, CL: []int{32}}))
	if _, err := sh.Forward(a); err != nil {
		t.Fatal(err)
	}
	if err := sh.Truncate(6); err == nil || !strings.Contains(err.Error(), "Gated DeltaNet") {
		t.Errorf("hybrid rewind: %v", err)
	}
	if err := sh.Truncate(0); err != nil {
		t.Fatal(err)
	}
	got, err = sh.ForwardAll(b)
	if err != nil {
		t.Fatal(err)
	}
	if ref, err = eh.Logits(ctx, b); err != nil {
		t.Fatal(err)
	}
	if !bitEqualRows(got, ref) {
		t.Fatal("hybrid after truncate to 0: logits differ from whole")
	}
}
