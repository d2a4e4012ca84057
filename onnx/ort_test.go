//go:build cgo

// ONNX Runtime is loaded through cgo (github.com/yalue/onnxruntime_go).

package onnx

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit"
	"github.com/qnnprep/qnnprep/testkit/ortpeer"
)

// ortMasked is what a test mask holds for "do not attend": exp of it
// underflows to 0, as the runtime's boolean mask excludes the slot.
const ortMasked = -1e4

// ortStager runs exported stage graphs with ONNX Runtime and keeps the
// state the way Genie's KV manager does: every past_*_out is appended to
// (KV) or replaces (conv, ssm) what the next call gets as past_*_in.
type ortStager struct {
	t        *testing.T
	cfg      model.Config
	plan     *shard.Plan
	dir      string
	sessions map[string]*ort.DynamicAdvancedSession
	n        int                  // positions processed
	keys     map[int][][]float32  // layer → position → [nkv][D]
	values   map[int][][]float32  // layer → position → [nkv][D]
	state    map[string][]float32 // past_conv/ssm by _in name
}

func newORTStager(t *testing.T, cfg model.Config, p *shard.Plan, dir string) *ortStager {
	return &ortStager{t: t, cfg: cfg, plan: p, dir: dir, sessions: map[string]*ort.DynamicAdvancedSession{},
		keys: map[int][][]float32{}, values: map[int][][]float32{}, state: map[string][]float32{}}
}

func (s *ortStager) close() {
	for _, ss := range s.sessions {
		ss.Destroy()
	}
}

func (s *ortStager) session(g *shard.Graph) *ort.DynamicAdvancedSession {
	if ss, ok := s.sessions[g.Name]; ok {
		return ss
	}
	var in, out []string
	for _, t := range g.Inputs {
		in = append(in, t.Name)
	}
	for _, t := range g.Outputs {
		out = append(out, t.Name)
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		s.t.Fatal(err)
	}
	defer opts.Destroy()
	opts.SetIntraOpNumThreads(1)
	opts.SetInterOpNumThreads(1)
	ss, err := ort.NewDynamicAdvancedSession(filepath.Join(s.dir, g.Name+".onnx"), in, out, opts)
	if err != nil {
		s.t.Fatalf("%s: %v", g.Name, err)
	}
	s.sessions[g.Name] = ss
	return ss
}

// ropeInputs are the [AR, R/2] cos and sin rows for positions n…n+AR−1,
// built like the runtime's (and ggml's) rope cache, scaling included.
func ropeInputs(c *model.Config, n, ar int) (cos, sin []float32) {
	r, err := c.Rope()
	if err != nil {
		panic(err) // the test's own config
	}
	h := r.Pairs()
	cos, sin = make([]float32, ar*h), make([]float32, ar*h)
	for i := 0; i < ar; i++ {
		r.Table(int32(n+i), cos[i*h:(i+1)*h], sin[i*h:(i+1)*h])
	}
	return cos, sin
}

// run feeds the AR tokens to every stage of variant (ar, cl) in turn and
// returns each stage's main output (hidden states, then logits).
func (s *ortStager) run(tokens []int32, cl int) [][]float32 {
	t, c := s.t, &s.cfg
	ar := len(tokens)
	past := cl - ar
	if s.n+ar > cl {
		t.Fatalf("%d positions do not fit CL %d", s.n+ar, cl)
	}
	cos, sin := ropeInputs(c, s.n, ar)
	mask := make([]float32, ar*cl)
	for i := 0; i < ar; i++ {
		for j := 0; j < cl; j++ {
			ok := j < s.n || (j >= past && j-past <= i)
			if !ok {
				mask[i*cl+j] = ortMasked
			}
		}
	}
	var hidden []float32
	var outs [][]float32
	nkv, d := c.KVHeads, c.HeadDim
	for st := range s.plan.Stages {
		g := s.plan.Graph(st, ar, cl)
		if g == nil {
			t.Fatalf("no graph for stage %d ar %d cl %d", st, ar, cl)
		}
		var inputs []ort.Value
		for _, in := range g.Inputs {
			var data []float32
			var l int
			switch {
			case in.Name == shard.InputIDs:
				v, err := ort.NewTensor(ort.NewShape(in.Shape...), append([]int32(nil), tokens...))
				if err != nil {
					t.Fatal(err)
				}
				inputs = append(inputs, v)
				continue
			case in.Name == shard.PositionIDs:
				pos := make([]int32, ar)
				for i := range pos {
					pos[i] = int32(s.n + i)
				}
				v, err := ort.NewTensor(ort.NewShape(in.Shape...), pos)
				if err != nil {
					t.Fatal(err)
				}
				inputs = append(inputs, v)
				continue
			case in.Name == shard.AttentionMask:
				data = mask
			case in.Name == shard.PositionIDsCos:
				data = cos
			case in.Name == shard.PositionIDsSin:
				data = sin
			case in.Name == shard.HiddenStates(st-1):
				data = hidden
			case sscan(in.Name, "past_key_%d_in", &l):
				data = make([]float32, nkv*d*past)
				for j, kv := range s.keys[l] {
					for h := 0; h < nkv; h++ {
						for e := 0; e < d; e++ {
							data[(h*d+e)*past+j] = kv[h*d+e]
						}
					}
				}
			case sscan(in.Name, "past_value_%d_in", &l):
				data = make([]float32, nkv*past*d)
				for j, kv := range s.values[l] {
					for h := 0; h < nkv; h++ {
						copy(data[(h*past+j)*d:(h*past+j+1)*d], kv[h*d:(h+1)*d])
					}
				}
			default:
				n := int64(1)
				for _, x := range in.Shape {
					n *= x
				}
				data = s.state[in.Name]
				if data == nil {
					data = make([]float32, n)
				}
			}
			v, err := ort.NewTensor(ort.NewShape(in.Shape...), append([]float32(nil), data...))
			if err != nil {
				t.Fatalf("%s: %s: %v", g.Name, in.Name, err)
			}
			inputs = append(inputs, v)
		}
		outputs := make([]ort.Value, len(g.Outputs))
		if err := s.session(g).Run(inputs, outputs); err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		for i, o := range g.Outputs {
			data := append([]float32(nil), outputs[i].(*ort.Tensor[float32]).GetData()...)
			var l int
			switch {
			case i == 0:
				hidden = data
				outs = append(outs, data)
			case sscan(o.Name, "past_key_%d_out", &l):
				for j := 0; j < ar; j++ {
					kv := make([]float32, nkv*d)
					for h := 0; h < nkv; h++ {
						for e := 0; e < d; e++ {
							kv[h*d+e] = data[(h*d+e)*ar+j]
						}
					}
					s.keys[l] = append(s.keys[l], kv)
				}
			case sscan(o.Name, "past_value_%d_out", &l):
				for j := 0; j < ar; j++ {
					kv := make([]float32, nkv*d)
					for h := 0; h < nkv; h++ {
						copy(kv[h*d:(h+1)*d], data[(h*ar+j)*d:(h*ar+j+1)*d])
					}
					s.values[l] = append(s.values[l], kv)
				}
			default: // conv and ssm state: the output is the next input
				s.state[o.Name[:len(o.Name)-len("out")]+"in"] = data
			}
			outputs[i].Destroy()
		}
		for _, v := range inputs {
			v.Destroy()
		}
	}
	s.n += ar
	return outs
}

func sscan(s, format string, l *int) bool {
	var rest string
	n, _ := fmt.Sscanf(s+" x", format+" %s", l, &rest)
	return n == 2
}

// runtimeStages runs the same tokens through the runtime layer range by
// layer range and returns each stage's output, like ortStager.run.
func runtimeStages(t *testing.T, st *runtime.State, p *shard.Plan, tokens []int32) [][]float32 {
	e := st.Engine()
	x := make([]float32, len(tokens)*e.Hidden())
	if err := e.Embed(tokens, x); err != nil {
		t.Fatal(err)
	}
	var outs [][]float32
	for _, s := range p.Stages {
		if err := st.RunLayers(s.FirstLayer, s.LastLayer+1, x, nil, nil); err != nil {
			t.Fatal(err)
		}
		if s.Head {
			logits := make([]float32, len(tokens)*e.VocabSize())
			if err := st.Head(x, logits); err != nil {
				t.Fatal(err)
			}
			outs = append(outs, logits)
		} else {
			outs = append(outs, append([]float32(nil), x...))
		}
	}
	return outs
}

func maxAbsDiff(a, b []float32) (float64, int) {
	if len(a) != len(b) {
		return math.Inf(1), -1
	}
	var m float64
	at := -1
	for i := range a {
		if d := math.Abs(float64(a[i]) - float64(b[i])); d > m || math.IsNaN(d) {
			m, at = d, i
		}
	}
	return m, at
}

// TestORTMatchesRuntime exports two-stage float32 plans (AR 4 for the
// prompt, AR 1 for decoding) of every architecture, runs them with ONNX
// Runtime, carrying KV and Gated DeltaNet state between calls like
// Genie, and compares every stage's outputs with the Go runtime's for the
// same layers (1e-4 absolute): hidden states and logits, and the state
// surfaces past_key/value_L_out, past_conv_L_out and past_ssm_L_out
// against the runtime's caches (State.KV, State.DeltaNet). The chained
// ORT stages must give the runtime's 16 greedy tokens.
func TestORTMatchesRuntime(t *testing.T) {
	ortpeer.Need(t)
	const prompt, steps, cl = 4, 16, 32
	type tcase struct {
		arch      model.Arch
		opset, ir int64
	}
	var cases []tcase
	for _, a := range archs {
		cases = append(cases, tcase{a, 17, 8})
	}
	// Opset 18 moves the reduction axes to an input; 21 with IR 10 is a
	// current pair. qwen35 uses every reduction the builder emits.
	cases = append(cases, tcase{model.Qwen35, 18, 8}, tcase{model.Qwen35, 21, 10})
	for _, tc := range cases {
		arch := tc.arch
		t.Run(fmt.Sprintf("%s/opset%d", arch, tc.opset), func(t *testing.T) {
			cfg := synth.Config(arch, false)
			m := tinyModel(t, cfg, 11)
			p := testPlan(t, m, 2, []int{prompt, 1}, cl)
			dir := t.TempDir()
			if _, err := Export(m, p, dir, ExportOptions{Options: Options{Opset: tc.opset}, IRVersion: tc.ir}, nil); err != nil {
				t.Fatal(err)
			}
			ortMatchesRuntime(t, m, p, dir, []int32{1, 17, 42, 5}, steps, cl)
		})
	}
}

// ortMatchesRuntime runs plan p's exported stages in dir with ONNX
// Runtime from toks for steps calls and holds every stage output and
// state surface to the runtime's (1e-4) and the chained greedy tokens to
// the runtime's greedy decode.
func ortMatchesRuntime(t *testing.T, m *model.Model, p *shard.Plan, dir string, toks []int32, steps, cl int) {
	t.Helper()
	cfg := m.Config
	e, err := runtime.New(m, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.Greedy(context.Background(), toks, steps)
	if err != nil {
		t.Fatal(err)
	}
	ost := newORTStager(t, cfg, p, dir)
	defer ost.close()
	rs := e.NewState()
	var got []int32
	var worst float64
	in := toks
	for step := 0; step < steps; step++ {
		o := ost.run(in, cl)
		r := runtimeStages(t, rs, p, in)
		for i := range o {
			d, at := maxAbsDiff(o[i], r[i])
			worst = max(worst, d)
			if d > 1e-4 {
				t.Fatalf("step %d stage %d: ORT and runtime differ by %g at %d (%v vs %v)", step, i, d, at, o[i][at], r[i][at])
			}
		}
		worst = max(worst, compareState(t, cfg, ost, rs, step))
		logits := o[len(o)-1]
		v := cfg.VocabSize
		next := runtime.Argmax(logits[len(logits)-v:])
		got = append(got, next)
		in = []int32{next}
	}
	t.Logf("max |ORT − runtime| over %d calls and all stage outputs: %.3g; greedy %v", steps, worst, got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ORT greedy %v, runtime greedy %v", got, want)
	}
}

// TestORTRopeScaling: stages of models with linear, yarn and llama3 RoPE
// scaling match the runtime in ONNX Runtime, both with fed cos/sin rows
// (rope plans, YaRN's magnitude above 1 included) and with the scaled
// tables inside the graphs (absolute plans, which Genie needs for linear
// and yarn).
func TestORTRopeScaling(t *testing.T) {
	ortpeer.Need(t)
	const prompt, steps, cl = 24, 8, 64
	toks := make([]int32, prompt)
	for i := range toks {
		toks[i] = int32(1 + (i*37)%90)
	}
	for _, arch := range []model.Arch{model.Llama, model.Qwen3} {
		for _, s := range synth.RopeScalings(arch) {
			for _, pos := range []shard.Positional{shard.Rope, shard.Absolute} {
				t.Run(fmt.Sprintf("%s/%s/%s", arch, s.Type, pos), func(t *testing.T) {
					s.OrigContext = min(s.OrigContext, 16) // under the plan's CL of 64
					cfg := synth.RopeScaled(synth.Config(arch, false), s)
					m := tinyModel(t, cfg, 5)
					p, err := shard.NewPlan(m.Config, shard.Sizes{Layers: make([]int64, m.Config.Layers)}, "tiny_"+string(arch),
						shard.Options{Stages: 2, AR: []int{prompt, 1}, CL: []int{cl}, Positional: pos})
					if err != nil {
						t.Fatal(err)
					}
					dir := t.TempDir()
					if _, err := Export(m, p, dir, ExportOptions{}, nil); err != nil {
						t.Fatal(err)
					}
					ortMatchesRuntime(t, m, p, dir, toks, steps, cl)
				})
			}
		}
	}
}

// compareState checks the state ORT produced (KV appended so far, the
// last conv and ssm outputs) against the runtime's caches and returns the
// largest difference.
func compareState(t *testing.T, cfg model.Config, ost *ortStager, rs *runtime.State, step int) float64 {
	t.Helper()
	var worst float64
	check := func(what string, a, b []float32) {
		d, at := maxAbsDiff(a, b)
		worst = max(worst, d)
		if d > 1e-4 {
			t.Fatalf("step %d: %s: ORT and runtime differ by %g at %d", step, what, d, at)
		}
	}
	for l, kind := range cfg.LayerKinds {
		if kind == model.Attention {
			k, v := rs.KV(l)
			var ok, ov []float32
			for j := range ost.keys[l] {
				ok = append(ok, ost.keys[l][j]...)
				ov = append(ov, ost.values[l][j]...)
			}
			check(shard.PastKey(l, "out"), ok, k)
			check(shard.PastValue(l, "out"), ov, v)
			continue
		}
		conv, ssm := rs.DeltaNet(l)
		c := cfg.ConvDim()
		taps := cfg.ConvKernel - 1
		got := ost.state[shard.PastConv(l, "in")]
		tr := make([]float32, len(conv)) // runtime [tap][channel] → plan [channel][tap]
		for j := 0; j < taps; j++ {
			for ch := 0; ch < c; ch++ {
				tr[ch*taps+j] = conv[j*c+ch]
			}
		}
		check(shard.PastConv(l, "out"), got, tr)
		check(shard.PastSSM(l, "out"), ost.state[shard.PastSSM(l, "in")], ssm)
	}
	return worst
}

// TestORTStoriesGreedy exports stories260K (the llama.cpp GGUF, and the
// Hugging Face checkpoint with its tied head) as two stages for AR 1 and
// CL 128, chains the stages with ONNX Runtime from BOS, and must produce
// the fixture's 64 greedy ids (from llama2.c's run.c and llama.cpp).
func TestORTStoriesGreedy(t *testing.T) {
	want, err := os.ReadFile(testkit.Stories(t, "greedy_ids_from_bos_first64.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ortpeer.Need(t)
	for _, path := range []string{testkit.Stories(t, "stories260K-llamacpp.gguf"), testkit.Stories(t, "hf")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			m, err := model.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			p, err := shard.PlanModel(m, shard.Options{Stages: 2, AR: []int{1}, CL: []int{128}})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if _, err := Export(m, p, dir, ExportOptions{}, nil); err != nil {
				t.Fatal(err)
			}
			ost := newORTStager(t, m.Config, p, dir)
			defer ost.close()
			var got []string
			tok := int32(1)
			for len(got) < 64 {
				o := ost.run([]int32{tok}, 128)
				tok = runtime.Argmax(o[len(o)-1])
				got = append(got, fmt.Sprint(tok))
			}
			if g := strings.Join(got, " "); g != strings.TrimSpace(string(want)) {
				t.Fatalf("ORT greedy from BOS:\n%s\nwant\n%s", g, want)
			}
		})
	}
}

// TestORTARc runs the AR-c graphs (CL == AR: no past inputs, DeltaNet
// state from zero) on a full-length prompt and compares every stage and
// state output with a runtime prefill of the same tokens.
func TestORTARc(t *testing.T) {
	ortpeer.Need(t)
	const ar = 8
	for _, arch := range []model.Arch{model.Llama, model.Qwen35} {
		t.Run(string(arch), func(t *testing.T) {
			cfg := synth.Config(arch, false)
			m := tinyModel(t, cfg, 13)
			p, err := shard.NewPlan(cfg, shard.Sizes{Layers: make([]int64, cfg.Layers)}, "arc", shard.Options{Stages: 2, AR: []int{ar}, CL: []int{ar}, ARc: true})
			if err != nil {
				t.Fatal(err)
			}
			if p.Variants[0].Mode != shard.ModeARc {
				t.Fatalf("variant mode %s, want %s", p.Variants[0].Mode, shard.ModeARc)
			}
			dir := t.TempDir()
			if _, err := Export(m, p, dir, ExportOptions{}, nil); err != nil {
				t.Fatal(err)
			}
			e, err := runtime.New(m, runtime.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			ost := newORTStager(t, cfg, p, dir)
			defer ost.close()
			rs := e.NewState()
			toks := []int32{1, 9, 33, 70, 2, 51, 8, 90}
			o := ost.run(toks, ar)
			r := runtimeStages(t, rs, p, toks)
			for i := range o {
				if d, at := maxAbsDiff(o[i], r[i]); d > 1e-4 {
					t.Fatalf("stage %d: ORT and runtime differ by %g at %d", i, d, at)
				}
			}
			compareState(t, cfg, ost, rs, 0)
		})
	}
}

// TestORTAbsolutePositions: a plan with absolute position_ids exports
// graphs that look their RoPE rows up themselves, and they compute what
// the rope plan's graphs compute from fed cos/sin rows.
func TestORTAbsolutePositions(t *testing.T) {
	ortpeer.Need(t)
	const cl = 32
	for _, arch := range []model.Arch{model.Llama, model.Qwen35} {
		t.Run(string(arch), func(t *testing.T) {
			cfg := synth.Config(arch, false)
			m := tinyModel(t, cfg, 7)
			stagers := make([]*ortStager, 2)
			for i, pos := range []shard.Positional{shard.Rope, shard.Absolute} {
				p, err := shard.NewPlan(m.Config, shard.Sizes{Layers: make([]int64, m.Config.Layers)}, "tiny_"+string(arch),
					shard.Options{Stages: 2, AR: []int{4, 1}, CL: []int{cl}, Positional: pos})
				if err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				if _, err := Export(m, p, dir, ExportOptions{}, nil); err != nil {
					t.Fatalf("%s: %v", pos, err)
				}
				stagers[i] = newORTStager(t, cfg, p, dir)
				defer stagers[i].close()
			}
			in := []int32{1, 17, 42, 5}
			for step := 0; step < 6; step++ {
				want, got := stagers[0].run(in, cl), stagers[1].run(in, cl)
				for i := range want {
					if d, at := maxAbsDiff(got[i], want[i]); d > 1e-6 {
						t.Fatalf("step %d stage %d: absolute and rope graphs differ by %g at %d", step, i, d, at)
					}
				}
				logits := want[len(want)-1]
				in = []int32{runtime.Argmax(logits[len(logits)-cfg.VocabSize:])}
			}
		})
	}
}
