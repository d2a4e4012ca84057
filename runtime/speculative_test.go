package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

var specArchs = []model.Arch{model.Llama, model.Qwen3, model.Qwen35}

// specSize is the tokens and prompts the speculative tests decode: 128
// tokens on 8 prompts with QNNPREP_SPEC_FULL=1 (about a minute), 128 on 3
// by default, short tokens on 2 with -short.
func specSize(short int) (n, prompts int) {
	switch {
	case os.Getenv("QNNPREP_SPEC_FULL") != "":
		return 128, 8
	case testing.Short():
		return short, 2
	}
	return 128, 3
}

// specTarget is a tiny target of arch with room for 8 prompts of up to 16
// tokens and 128 generated ones.
func specTarget(t testing.TB, arch model.Arch, ctx int) (model.Config, *Engine) {
	cfg := synth.Config(arch, false)
	cfg.ContextLength = ctx
	cfg.TiedEmbeddings = false
	return cfg, newEngine(t, tinyModel(t, cfg, gguf.Q8_0, 40), Options{})
}

// smallDraft is a smaller model of the same architecture and vocabulary:
// fewer layers (one DeltaNet and the attention layer on hybrids).
func smallDraft(t testing.TB, cfg model.Config) *Engine {
	d := cfg
	d.Layers = 1
	d.FFN = 128
	d.LayerKinds = []model.LayerKind{model.Attention}
	if cfg.Hybrid() {
		d.Layers = 2
		d.LayerKinds = []model.LayerKind{model.DeltaNet, model.Attention}
	}
	return newEngine(t, tinyModel(t, d, gguf.F32, 41), Options{})
}

// truncatedDraft is the target's first layers with its embeddings and
// head: a crude self-distilled draft whose proposals are often right.
func truncatedDraft(t testing.TB, target *model.Model, keep int) *Engine {
	cfg := target.Config
	cfg.Layers = keep
	cfg.LayerKinds = append([]model.LayerKind(nil), cfg.LayerKinds[:keep]...)
	var ts []*model.Tensor
	for _, s := range model.ExpectedTensors(cfg) {
		tt := target.Tensor(s.Name)
		if tt == nil {
			if s.Optional {
				continue
			}
			t.Fatalf("target lacks %s", s.Name)
		}
		ts = append(ts, tt)
	}
	m, err := model.New(cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	return newEngine(t, m, Options{})
}

// randomEagle3 builds an EAGLE-3 head with random weights, a draft
// vocabulary of 64 target ids and the target's embeddings.
func randomEagle3(t testing.TB, target *Engine, seed uint64) (Eagle3Config, []*model.Tensor) {
	tc := target.Config()
	cfg := Eagle3Config{
		Hidden: tc.Hidden, FFN: 256, Heads: 4, KVHeads: 2, HeadDim: 32, DraftVocab: 64,
		TargetHidden: tc.Hidden, ExtractLayers: DefaultExtractLayers(tc.Layers), RMSEps: 1e-5, RopeTheta: 10000,
	}
	return cfg, randomEagle3Tensors(t, target, cfg, seed)
}

// randomEagle3Tensors makes random tensors of an EAGLE-3 head of shape cfg
// for target.
func randomEagle3Tensors(t testing.TB, target *Engine, cfg Eagle3Config, seed uint64) []*model.Tensor {
	tc := target.Config()
	rng := rand.New(rand.NewPCG(seed, 3))
	H, qd, kvd := cfg.Hidden, cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	mat := func(name string, cols, rows int, typ gguf.Type) *model.Tensor {
		v := make([]float32, cols*rows)
		sc := float32(1 / math.Sqrt(float64(cols)))
		for i := range v {
			v[i] = sc * float32(rng.NormFloat64())
		}
		return model.NewTensor(name, []int64{int64(cols), int64(rows)}, typ, encode(t, typ, v, cols))
	}
	norm := func(name string) *model.Tensor {
		v := make([]float32, H)
		for i := range v {
			v[i] = 1 + 0.1*float32(rng.NormFloat64())
		}
		return model.NewTensor(name, []int64{int64(H)}, gguf.F32, encode(t, gguf.F32, v, H))
	}
	d2t := make([]byte, 8*cfg.DraftVocab)
	for i, id := range rng.Perm(tc.VocabSize)[:cfg.DraftVocab] {
		binary.LittleEndian.PutUint64(d2t[8*i:], uint64(id))
	}
	return []*model.Tensor{
		mat(e3FC, 3*tc.Hidden, H, gguf.Q8_0),
		model.NewTensor(e3D2T, []int64{int64(cfg.DraftVocab)}, gguf.I64, d2t),
		norm(e3InNorm), norm(e3HidNorm),
		mat(e3Q, 2*H, qd, gguf.F32), mat(e3K, 2*H, kvd, gguf.F32), mat(e3V, 2*H, kvd, gguf.F32), mat(e3O, qd, H, gguf.F16),
		norm(e3PostNorm),
		mat(e3Gate, H, cfg.FFN, gguf.Q8_0), mat(e3Up, H, cfg.FFN, gguf.Q8_0), mat(e3Down, cfg.FFN, H, gguf.Q8_0),
		norm(e3Norm), mat(e3Head, H, cfg.DraftVocab, gguf.F32),
	}
}

func newEagle3(t testing.TB, target *Engine, seed uint64) *Eagle3 {
	cfg, ts := randomEagle3(t, target, seed)
	h, err := NewEagle3(target, cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// checkSpec decodes every prompt greedily and speculatively with K = 1…4
// and requires identical tokens; it returns the stats per K.
func checkSpec(t *testing.T, target *Engine, prompts [][]int32, n int, mk func() Drafter) [4]SpecStats {
	t.Helper()
	var all [4]SpecStats
	for pi, p := range prompts {
		want, err := target.Greedy(context.Background(), p, n)
		if err != nil {
			t.Fatal(err)
		}
		if d := distinct(want); d < 4 {
			t.Fatalf("prompt %d: greedy output has only %d distinct tokens: the test model is too degenerate to test rollback", pi, d)
		}
		for k := 1; k <= 4; k++ {
			got, st, err := target.Speculate(context.Background(), mk(), p, n, k)
			if err != nil {
				t.Fatalf("prompt %d, K=%d: %v", pi, k, err)
			}
			if err := sameTokens(got, want); err != nil {
				t.Fatalf("prompt %d, K=%d: speculative differs from greedy: %v", pi, k, err)
			}
			if st.TargetCalls != st.Windows+1 || st.Tokens != n {
				t.Fatalf("prompt %d, K=%d: stats %+v", pi, k, st)
			}
			a := &all[k-1]
			a.Tokens += st.Tokens
			a.Windows += st.Windows
			a.TargetCalls += st.TargetCalls
			a.Proposed += st.Proposed
			a.Accepted += st.Accepted
		}
	}
	return all
}

func distinct(ids []int32) int {
	m := map[int32]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return len(m)
}

func sameTokens(got, want []int32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d tokens, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("token %d: %d, want %d\n got %v\nwant %v", i, got[i], want[i], got, want)
		}
	}
	return nil
}

func specPrompts(vocab int) [][]int32 {
	var ps [][]int32
	for i := 0; i < 8; i++ {
		ps = append(ps, randomTokens(3+2*i, vocab, uint64(100+i)))
	}
	return ps
}

func logStats(t *testing.T, name string, all [4]SpecStats) {
	for k, st := range all {
		t.Logf("%s K=%d: acceptance length %.2f (of %d), %.3f target calls/token, accept rate %.2f",
			name, k+1, st.AcceptanceLength(), k+1, st.TargetCallsPerToken(), st.AcceptanceRate())
	}
}

// TestSpeculativeDrafters: for llama, qwen3 and qwen35 targets, decoding
// 128 tokens on 8 prompts with K = 1…4 through a smaller draft model, a
// truncated copy of the target, a random EAGLE-3 head and the target
// itself gives exactly the greedy tokens; the target as its own draft
// accepts every proposal.
func TestSpeculativeDrafters(t *testing.T) {
	n, prompts := specSize(48)
	for _, arch := range specArchs {
		t.Run(string(arch), func(t *testing.T) {
			cfg := synth.Config(arch, false)
			cfg.ContextLength = 160
			cfg.TiedEmbeddings = false // tied random models just repeat the last token
			tm := tinyModel(t, cfg, gguf.Q8_0, 40)
			target := newEngine(t, tm, Options{})
			prompts := specPrompts(cfg.VocabSize)[:prompts]
			small := smallDraft(t, cfg)
			trunc := truncatedDraft(t, tm, cfg.Layers-1)
			head := newEagle3(t, target, 5)
			for _, tc := range []struct {
				name    string
				prompts int // how many of the prompts (the self drafts cost a target each)
				mk      func() Drafter
			}{
				{"draft", 8, func() Drafter { d, _ := NewDraftModel(target, small); return d }},
				{"truncated", 3, func() Drafter { d, _ := NewDraftModel(target, trunc); return d }},
				{"eagle3", 8, func() Drafter { return head.Drafter() }},
				{"self", 3, func() Drafter { d, _ := NewDraftModel(target, target); return d }},
				// The target as draft with one proposal per window spoilt, at a
				// position cycling through 0…K: every acceptance length and
				// every rollback depth of the draft's state occurs.
				{"self-spoilt", 3, func() Drafter {
					d, _ := NewDraftModel(target, target)
					return &spoiler{Drafter: d, vocab: cfg.VocabSize}
				}},
			} {
				all := checkSpec(t, target, prompts[:min(tc.prompts, len(prompts))], n, tc.mk)
				logStats(t, tc.name, all)
				if tc.name == "self" {
					for k, st := range all {
						if st.Accepted != st.Proposed {
							t.Errorf("self draft, K=%d: %d of %d proposals accepted", k+1, st.Accepted, st.Proposed)
						}
						// Every window but each prompt's last is full.
						if min := float64(k+1) - float64(min(tc.prompts, len(prompts))*k)/float64(st.Windows); st.AcceptanceLength() < min {
							t.Errorf("self draft, K=%d: acceptance length %.2f", k+1, st.AcceptanceLength())
						}
					}
				}
			}
		})
	}
}

// spoiler changes draft token w mod (K+1) of window w (none when that is K).
type spoiler struct {
	Drafter
	vocab, w int
}

func (s *spoiler) Propose(last int32, k int) ([]int32, error) {
	d, err := s.Drafter.Propose(last, k)
	if i := s.w % (k + 1); i < len(d) {
		d = append([]int32(nil), d...)
		d[i] = (d[i] + 1) % int32(s.vocab)
	}
	s.w++
	return d, err
}

// TestEagle3Features: the features ForwardFeatures returns are the inputs
// of the named layers, as RunLayers computes them, and its logits are
// Forward's.
func TestEagle3Features(t *testing.T) {
	for _, arch := range specArchs {
		t.Run(string(arch), func(t *testing.T) {
			cfg, e := specTarget(t, arch, 64)
			toks := randomTokens(40, cfg.VocabSize, 9)
			layers := []int{0, 1, cfg.Layers}
			st := e.NewState()
			rows, feats, err := st.ForwardFeatures(toks, layers, true)
			if err != nil {
				t.Fatal(err)
			}
			want, err := e.Logits(context.Background(), toks)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if err := sameBits(rows[i], want[i]); err != nil {
					t.Fatalf("row %d: %v", i, err)
				}
			}
			// Recompute the features token by token through RunLayers.
			ref := e.NewState()
			h := cfg.Hidden
			for i, tok := range toks {
				x := make([]float32, h)
				if err := e.Embed([]int32{tok}, x); err != nil {
					t.Fatal(err)
				}
				at := 0
				for j, l := range layers {
					if err := ref.RunLayers(at, l, x, nil, nil); err != nil {
						t.Fatal(err)
					}
					at = l
					if err := sameBits(feats[i][j*h:(j+1)*h], x); err != nil {
						t.Fatalf("token %d, layer %d: %v", i, l, err)
					}
				}
			}
		})
	}
}

// TestLongPromptSpeculative: a 2048-token prompt, speculative equals greedy.
func TestLongPromptSpeculative(t *testing.T) {
	cfg := synth.Config(model.Qwen35, false)
	cfg.ContextLength = 2048 + 32
	cfg.TiedEmbeddings = false
	tm := tinyModel(t, cfg, gguf.Q8_0, 40)
	target := newEngine(t, tm, Options{})
	prompt := randomTokens(2048, cfg.VocabSize, 77)
	want, err := target.Greedy(context.Background(), prompt, 24)
	if err != nil {
		t.Fatal(err)
	}
	head := newEagle3(t, target, 6)
	trunc := truncatedDraft(t, tm, 3)
	for _, d := range []Drafter{head.Drafter(), must(NewDraftModel(target, trunc))} {
		got, st, err := target.Speculate(context.Background(), d, prompt, 24, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameTokens(got, want); err != nil {
			t.Fatal(err)
		}
		t.Logf("%T: acceptance length %.2f", d, st.AcceptanceLength())
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// eagle3Writer lays a head's config and tensors out as an eagle3 GGUF.
func eagle3Writer(cfg Eagle3Config, ts []*model.Tensor) *gguf.Writer {
	w := &gguf.Writer{Metadata: Eagle3Metadata(cfg)}
	for _, tt := range ts {
		data, _ := tt.Data()
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: tt.Name, Dims: tt.Dims, Type: tt.Type, Data: gguf.Bytes(data)})
	}
	return w
}

// TestEagle3GGUF: a head written as an eagle3 GGUF loads to the same
// drafter (same proposals) as the in-memory tensors.
func TestEagle3GGUF(t *testing.T) {
	_, target := specTarget(t, model.Llama, 160)
	cfg, ts := randomEagle3(t, target, 8)
	w := eagle3Writer(cfg, ts)
	path := filepath.Join(t.TempDir(), "eagle3.gguf")
	if err := gguf.WriteFile(path, w); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadEagle3(target, path)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	if loaded.Config() != must(NewEagle3(target, cfg, ts)).Config() {
		t.Fatalf("config %+v, want %+v", loaded.Config(), cfg)
	}
	mem := must(NewEagle3(target, cfg, ts))
	prompt := randomTokens(7, 96, 1)
	a, sa, err := target.Speculate(context.Background(), loaded.Drafter(), prompt, 40, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, sb, err := target.Speculate(context.Background(), mem.Drafter(), prompt, 40, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameTokens(a, b); err != nil || sa.Accepted != sb.Accepted || sa.Windows != sb.Windows {
		t.Fatalf("loaded head decodes differently: %v, %+v vs %+v", err, sa, sb)
	}
}

// TestEagle3Errors: bad heads are refused with the tensor named.
func TestEagle3Errors(t *testing.T) {
	_, target := specTarget(t, model.Llama, 64)
	cfg, ts := randomEagle3(t, target, 8)
	drop := func(name string) []*model.Tensor {
		var out []*model.Tensor
		for _, tt := range ts {
			if tt.Name != name {
				out = append(out, tt)
			}
		}
		return out
	}
	badD2T := make([]byte, 8*cfg.DraftVocab)
	binary.LittleEndian.PutUint64(badD2T[8:], 1000)
	withD2T := append(drop(e3D2T), model.NewTensor(e3D2T, []int64{int64(cfg.DraftVocab)}, gguf.I64, badD2T))
	wrongTarget := cfg
	wrongTarget.TargetHidden = 256
	badLayers := cfg
	badLayers.ExtractLayers = [3]int{0, 1, 9}
	for _, tc := range []struct {
		name string
		cfg  Eagle3Config
		ts   []*model.Tensor
		want string
	}{
		{"missing fc", cfg, drop(e3FC), `missing tensor "fc.weight"`},
		{"d2t out of range", cfg, withD2T, "outside the target vocabulary"},
		{"target hidden", wrongTarget, ts, "target hidden size 256"},
		{"extract layers", badLayers, ts, "extract layer 9"},
	} {
		_, err := NewEagle3(target, tc.cfg, tc.ts)
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	small := synth.Config(model.Llama, false)
	small.VocabSize = 64
	if _, err := NewDraftModel(target, newEngine(t, tinyModel(t, small, gguf.F32, 1), Options{})); err == nil {
		t.Errorf("a draft with another vocabulary was accepted")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// distilledEagle3 is an EAGLE-3 head that reproduces synthBigram: fc and
// hidden_norm are zero and the residual is normed first, so g drops out;
// q = k = 5·norm(embedding) makes every head attend to its own token;
// v and o copy the normed embedding into the residual; the MLP adds zero;
// norm and lm_head are the target's. Its proposals are what the target
// would say, so acceptance is high — reached only if the head's
// attention, RoPE, KV cache and row alignment work as §7.2 describes.
func distilledEagle3(t testing.TB, target *Engine, tm *model.Model) *Eagle3 {
	cfg, ts := distilledEagle3Parts(t, target, tm)
	return must(NewEagle3(target, cfg, ts))
}

// distilledEagle3Parts are distilledEagle3's config and tensors.
func distilledEagle3Parts(t testing.TB, target *Engine, tm *model.Model) (Eagle3Config, []*model.Tensor) {
	tc := target.Config()
	H := tc.Hidden
	cfg := Eagle3Config{Hidden: H, FFN: 128, Heads: 4, KVHeads: 4, HeadDim: H / 4, DraftVocab: tc.VocabSize,
		TargetHidden: H, ExtractLayers: DefaultExtractLayers(tc.Layers), RMSEps: tc.RMSEps, RopeTheta: 10000, NormBeforeResidual: true}
	f32 := func(name string, dims []int64, v []float32) *model.Tensor {
		return model.NewTensor(name, dims, gguf.F32, encode(t, gguf.F32, v, int(dims[0])))
	}
	fill := func(n int, v float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	// [I | 0] scaled: rows H, cols 2H.
	sel := func(scale float32) []float32 {
		m := make([]float32, H*2*H)
		for r := 0; r < H; r++ {
			m[r*2*H+r] = scale
		}
		return m
	}
	eye := make([]float32, H*H)
	for r := 0; r < H; r++ {
		eye[r*H+r] = 1
	}
	rng := rand.New(rand.NewPCG(9, 9))
	rnd := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = 0.1 * float32(rng.NormFloat64())
		}
		return out
	}
	outNorm, _ := tm.Tensor("output_norm.weight").Float32()
	head := tm.Tensor("output.weight")
	ts := []*model.Tensor{
		f32(e3FC, []int64{int64(3 * H), int64(H)}, make([]float32, 3*H*H)),
		f32(e3InNorm, []int64{int64(H)}, fill(H, 1)),
		f32(e3HidNorm, []int64{int64(H)}, make([]float32, H)),
		f32(e3Q, []int64{int64(2 * H), int64(H)}, sel(5)),
		f32(e3K, []int64{int64(2 * H), int64(H)}, sel(5)),
		f32(e3V, []int64{int64(2 * H), int64(H)}, sel(1)),
		f32(e3O, []int64{int64(H), int64(H)}, eye),
		f32(e3PostNorm, []int64{int64(H)}, fill(H, 1)),
		f32(e3Gate, []int64{int64(H), 128}, rnd(128*H)),
		f32(e3Up, []int64{int64(H), 128}, rnd(128*H)),
		f32(e3Down, []int64{128, int64(H)}, make([]float32, 128*H)),
		f32(e3Norm, []int64{int64(H)}, outNorm),
		model.NewTensor(e3Head, head.Dims, head.Type, must(head.Data())),
	}
	return cfg, ts
}

// TestEagle3SelfDistilled: a head built to reproduce its target proposes
// what the target says (high acceptance), and the output is greedy's.
func TestEagle3SelfDistilled(t *testing.T) {
	for _, arch := range specArchs {
		t.Run(string(arch), func(t *testing.T) {
			cfg := synth.Config(arch, false)
			cfg.ContextLength = 160
			cfg.TiedEmbeddings = false
			tm := synthBigram(t, cfg, 50)
			target := newEngine(t, tm, Options{})
			head := distilledEagle3(t, target, tm)
			all := checkSpec(t, target, specPrompts(cfg.VocabSize)[:4], 128, func() Drafter { return head.Drafter() })
			logStats(t, "distilled eagle3", all)
			for k, st := range all {
				if st.AcceptanceRate() < 0.9 {
					t.Errorf("K=%d: acceptance rate %.2f, want ≥ 0.9", k+1, st.AcceptanceRate())
				}
			}
		})
	}
}

// TestSpeculativeStaged: the same drafters through a shard plan (two
// stages, Genie-style KV manager and selection masks) give the whole
// model's greedy tokens, K = 1…4. (EAGLE-3 through a plan:
// TestStagedEagle3.)
func TestSpeculativeStaged(t *testing.T) {
	n, prompts := specSize(32)
	for _, arch := range specArchs {
		t.Run(string(arch), func(t *testing.T) {
			cfg := synth.Config(arch, false)
			cfg.ContextLength = 160
			cfg.TiedEmbeddings = false
			tm := tinyModel(t, cfg, gguf.Q8_0, 40)
			target := newEngine(t, tm, Options{})
			p, err := shard.PlanModel(tm, shard.Options{Stages: 2, AR: []int{8, 1}, CL: []int{160}})
			if err != nil {
				t.Fatal(err)
			}
			staged, err := NewStaged(target, p)
			if err != nil {
				t.Fatal(err)
			}
			small := smallDraft(t, cfg)
			for _, tc := range []struct {
				name string
				mk   func() Drafter
			}{
				{"draft", func() Drafter { return must(NewDraftModel(target, small)) }},
				{"self-spoilt", func() Drafter { return &spoiler{Drafter: must(NewDraftModel(target, target)), vocab: cfg.VocabSize} }},
			} {
				var acc, win int
				for pi, pr := range specPrompts(cfg.VocabSize)[:prompts] {
					want, err := target.Greedy(context.Background(), pr, n)
					if err != nil {
						t.Fatal(err)
					}
					for k := 1; k <= 4; k++ {
						got, st, err := staged.Speculate(context.Background(), tc.mk(), pr, n, k)
						if err != nil {
							t.Fatalf("%s, prompt %d, K=%d: %v", tc.name, pi, k, err)
						}
						if err := sameTokens(got, want); err != nil {
							t.Fatalf("%s, prompt %d, K=%d: staged speculative differs from whole greedy: %v", tc.name, pi, k, err)
						}
						acc, win = acc+st.Accepted, win+st.Windows
					}
				}
				t.Logf("%s staged: acceptance length %.2f over K=1…4", tc.name, float64(acc)/float64(win))
			}
		})
	}
}
