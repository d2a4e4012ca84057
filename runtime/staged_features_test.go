package runtime

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// featureConfig is synth's preset of arch with 7 layers (qwen35: DeltaNet
// except layer 3) and an untied head: EAGLE-3's default feature layers
// are then 2, 3 and 4, distinct, and a plan of uneven stages puts some
// inside a stage and some on a boundary.
func featureConfig(arch model.Arch) model.Config {
	c := stagedConfig(arch, 7)
	c.TiedEmbeddings = false
	return c
}

// TestRunLayersSplit: running layers [a, f) and then [f, b) gives
// bit-identical hidden states, caches and logits to running [a, b) in one
// call, for every a < f < b, over a prefill and single-token steps. The
// staged executor relies on it when it reads features between layers.
func TestRunLayersSplit(t *testing.T) {
	for _, arch := range specArchs {
		t.Run(string(arch), func(t *testing.T) {
			c := featureConfig(arch)
			e := newEngine(t, synthModel(t, c, 31), Options{Threads: 1})
			L, h := c.Layers, c.Hidden
			toks := randomTokens(9, c.VocabSize, 4)
			calls := [][]int32{toks[:6], toks[6:7], toks[7:8], toks[8:]}
			for a := 0; a < L-1; a++ {
				for f := a + 1; f < L; f++ {
					for b := f + 1; b <= L; b++ {
						whole, split := e.NewState(), e.NewState()
						for ci, call := range calls {
							xw := make([]float32, len(call)*h)
							if err := e.Embed(call, xw); err != nil {
								t.Fatal(err)
							}
							xs := slices.Clone(xw)
							run := func(st *State, x []float32, ranges ...[2]int) {
								for _, r := range ranges {
									if err := st.RunLayers(r[0], r[1], x, nil, nil); err != nil {
										t.Fatal(err)
									}
								}
							}
							run(whole, xw, [2]int{0, a}, [2]int{a, b}, [2]int{b, L})
							run(split, xs, [2]int{0, a}, [2]int{a, f}, [2]int{f, b}, [2]int{b, L})
							if err := sameBits(xs, xw); err != nil {
								t.Fatalf("[%d,%d)+[%d,%d) vs [%d,%d), call %d: hidden states: %v", a, f, f, b, a, b, ci, err)
							}
							lw, ls := make([]float32, len(call)*c.VocabSize), make([]float32, len(call)*c.VocabSize)
							if err := whole.Head(xw, lw); err != nil {
								t.Fatal(err)
							}
							if err := split.Head(xs, ls); err != nil {
								t.Fatal(err)
							}
							if err := sameBits(ls, lw); err != nil {
								t.Fatalf("[%d,%d)+[%d,%d) vs [%d,%d), call %d: logits: %v", a, f, f, b, a, b, ci, err)
							}
						}
						for l := range L {
							kw, vw := whole.KV(l)
							ks, vs := split.KV(l)
							if whole.layers[l].kind == model.DeltaNet {
								kw, vw = whole.DeltaNet(l)
								ks, vs = split.DeltaNet(l)
							}
							if sameBits(ks, kw) != nil || sameBits(vs, vw) != nil {
								t.Fatalf("[%d,%d)+[%d,%d) vs [%d,%d): layer %d state differs", a, f, f, b, a, b, l)
							}
						}
					}
				}
			}
		})
	}
}

// TestStagedFeatures: the features a plan's stage calls capture (at the
// embeddings, inside a stage, on a stage boundary and after the last
// layer) are bit-identical to State.ForwardFeatures' for the prompt
// (processed in chunks, or re-processed on AR-c graphs) and follow the
// selection mask of a speculative step: only the accepted rows' come out.
func TestStagedFeatures(t *testing.T) {
	for _, arch := range specArchs {
		c := featureConfig(arch)
		m := synthModel(t, c, 32)
		e := newEngine(t, m, Options{Threads: 1})
		layers := []int{0, 2, 3, 3, 5, c.Layers} // stages 3+2+2: 3 and 5 are boundaries
		prompt := randomTokens(11, c.VocabSize, 5)
		for _, o := range []shard.Options{
			{Stages: 3, AR: []int{4, 1}, CL: []int{64}},
			{Stages: 3, AR: []int{24}, CL: []int{24}, ARc: true},
		} {
			t.Run(fmt.Sprintf("%s/ar%v-cl%v", arch, o.AR, o.CL), func(t *testing.T) {
				s := newStaged(t, e, planFor(t, m, o))
				if err := s.SetFeatureLayers(layers); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Forward(prompt); err != nil {
					t.Fatal(err)
				}
				got := s.TakeFeatures()
				ref := e.NewState()
				_, want, err := ref.ForwardFeatures(prompt, layers, true)
				if err != nil {
					t.Fatal(err)
				}
				checkFeatureRows(t, "prompt", got, want)
				if more := s.TakeFeatures(); len(more) != 0 {
					t.Fatalf("TakeFeatures again gave %d rows, want 0", len(more))
				}
				// A step of three rows of which the first two are accepted.
				step := randomTokens(3, c.VocabSize, 6)
				if _, err := s.Submit(step, nil); err != nil {
					t.Fatal(err)
				}
				sel := make([]bool, len(s.step.tokens))
				for r := range s.step.reproc + 2 {
					sel[r] = true
				}
				if err := s.Commit(sel); err != nil {
					t.Fatal(err)
				}
				_, want, err = ref.ForwardFeatures(step[:2], layers, true)
				if err != nil {
					t.Fatal(err)
				}
				checkFeatureRows(t, "accepted rows", s.TakeFeatures(), want)
				// The rejected row's features are gone: the next token's
				// are those after the two accepted ones.
				if _, err := s.Forward(step[2:]); err != nil {
					t.Fatal(err)
				}
				_, want, err = ref.ForwardFeatures(step[2:], layers, true)
				if err != nil {
					t.Fatal(err)
				}
				checkFeatureRows(t, "after rollback", s.TakeFeatures(), want)
				// Features of tokens truncated before they are taken go too.
				if !c.Hybrid() {
					if _, err := s.Forward(step); err != nil {
						t.Fatal(err)
					}
					if err := s.Truncate(s.Len() - 2); err != nil {
						t.Fatal(err)
					}
					_, want, err = ref.ForwardFeatures(step[:1], layers, true)
					if err != nil {
						t.Fatal(err)
					}
					checkFeatureRows(t, "after truncating 2 of 3 new tokens", s.TakeFeatures(), want)
				}
				if err := s.SetFeatureLayers(nil); err != nil || s.TakeFeatures() != nil {
					t.Fatalf("without feature layers TakeFeatures must give nil (err %v)", err)
				}
				if err := s.SetFeatureLayers([]int{3, 2}); err == nil {
					t.Errorf("descending feature layers accepted")
				}
				if err := s.SetFeatureLayers([]int{c.Layers + 1}); err == nil {
					t.Errorf("feature layer past the model accepted")
				}
			})
		}
	}
}

func checkFeatureRows(t *testing.T, what string, got, want [][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d feature rows, want %d", what, len(got), len(want))
	}
	for i := range want {
		if err := sameBits(got[i], want[i]); err != nil {
			t.Fatalf("%s: row %d: %v", what, i, err)
		}
	}
}

// synthBigram is synth's model of cfg with the attention, DeltaNet and MLP
// output projections zeroed: its next token depends on the current
// token alone, which distilledEagle3 reproduces.
func synthBigram(t testing.TB, cfg model.Config, seed uint64) *model.Model {
	src := synthModel(t, cfg, seed)
	var ts []*model.Tensor
	for _, tt := range src.Tensors {
		for _, suf := range []string{".attn_output.weight", ".ffn_down.weight", ".ssm_out.weight"} {
			if len(tt.Name) > len(suf) && tt.Name[len(tt.Name)-len(suf):] == suf {
				rb, err := tt.Type.RowBytes(tt.Dims[0])
				if err != nil {
					t.Fatal(err)
				}
				tt = model.NewTensor(tt.Name, tt.Dims, tt.Type, make([]byte, rb*tt.Elements()/tt.Dims[0]))
			}
		}
		ts = append(ts, tt)
	}
	m, err := model.New(cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStagedEagle3: speculative decoding with an EAGLE-3 head through a
// plan of uneven stages (the head's feature layers 2, 3, 4 fall inside
// stages and on a boundary) gives the whole model's greedy tokens for
// llama, qwen3 and qwen35 targets, K = 1…4, for a random head, for one
// built to reproduce its target and for that one with a proposal per
// window spoilt (every acceptance length and rollback depth occurs), and
// its acceptance is exactly that of the whole-engine EAGLE-3 run.
// 128 tokens on 3 prompts, 2 for the random head, which accepts almost
// nothing and so costs a window per token (8 prompts with
// QNNPREP_SPEC_FULL=1; -short: 32 tokens on 2).
func TestStagedEagle3(t *testing.T) {
	n, prompts := specSize(32)
	ctx := context.Background()
	plans := map[model.Arch]shard.Options{
		model.Llama:  {Stages: 3, AR: []int{5, 1}, CL: []int{256}},      // 3+2+2
		model.Qwen3:  {Stages: 2, AR: []int{8, 1}, CL: []int{128, 256}}, // 4+3, CL switch mid-decode
		model.Qwen35: {Stages: 3, AR: []int{6, 1}, CL: []int{256}},      // 3+2+2
	}
	for _, arch := range specArchs {
		for _, headKind := range []string{"random", "oracle", "distilled", "spoilt"} {
			t.Run(string(arch)+"/"+headKind, func(t *testing.T) {
				c := featureConfig(arch)
				var tm *model.Model
				var target *Engine
				var mk func() Drafter
				if headKind == "random" || headKind == "oracle" {
					tm = synthModel(t, c, 33)
					target = newEngine(t, tm, Options{Threads: 1})
					head := newEagle3(t, target, 7)
					mk = func() Drafter { return head.Drafter() }
				} else {
					tm = synthBigram(t, c, 33)
					target = newEngine(t, tm, Options{Threads: 1})
					head := distilledEagle3(t, target, tm)
					mk = func() Drafter { return head.Drafter() }
					if headKind == "spoilt" {
						mk = func() Drafter { return &spoiler{Drafter: head.Drafter(), vocab: c.VocabSize} }
					}
				}
				staged := newStaged(t, target, planFor(t, tm, plans[arch]))
				np := prompts
				if (headKind == "random" || headKind == "oracle") && np == 3 {
					np = 2
				}
				var whole, through [4]SpecStats
				for pi, p := range specPrompts(c.VocabSize)[:np] {
					want, err := target.Greedy(ctx, p, n)
					if err != nil {
						t.Fatal(err)
					}
					if d := distinct(want); d < 4 {
						t.Fatalf("prompt %d: greedy output has only %d distinct tokens: too degenerate to test rollback", pi, d)
					}
					seq := append(slices.Clone(p), want...)
					for k := 1; k <= 4; k++ {
						rec := func() *featRecorder {
							r := &featRecorder{Drafter: mk(), vocab: c.VocabSize}
							if headKind == "oracle" {
								r.seq = seq
							}
							return r
						}
						wrec, srec := rec(), rec()
						wgot, wst, err := target.Speculate(ctx, wrec, p, n, k)
						if err != nil {
							t.Fatalf("whole, prompt %d, K=%d: %v", pi, k, err)
						}
						if err := sameTokens(wgot, want); err != nil {
							t.Fatalf("whole, prompt %d, K=%d: %v", pi, k, err)
						}
						got, st, err := staged.Speculate(ctx, srec, p, n, k)
						if err != nil {
							t.Fatalf("staged, prompt %d, K=%d: %v", pi, k, err)
						}
						if err := sameTokens(got, want); err != nil {
							t.Fatalf("prompt %d, K=%d: staged EAGLE-3 differs from whole greedy: %v", pi, k, err)
						}
						if st.Windows != wst.Windows || st.Proposed != wst.Proposed || st.Accepted != wst.Accepted || st.TargetCalls != wst.TargetCalls || st.Tokens != n {
							t.Fatalf("prompt %d, K=%d: staged stats %+v, whole %+v", pi, k, st, wst)
						}
						if err := srec.same(wrec); err != nil {
							t.Fatalf("prompt %d, K=%d: the head saw different things through the plan: %v", pi, k, err)
						}
						for _, pair := range []struct {
							sum *SpecStats
							one SpecStats
						}{{&whole[k-1], wst}, {&through[k-1], st}} {
							pair.sum.Windows += pair.one.Windows
							pair.sum.Proposed += pair.one.Proposed
							pair.sum.Accepted += pair.one.Accepted
							pair.sum.Tokens += pair.one.Tokens
						}
					}
				}
				for k := range 4 {
					t.Logf("K=%d: staged acceptance length %.3f (whole %.3f), accept rate %.3f, %d windows",
						k+1, through[k].AcceptanceLength(), whole[k].AcceptanceLength(), through[k].AcceptanceRate(), through[k].Windows)
					if headKind == "distilled" && through[k].AcceptanceRate() < 0.8 {
						t.Errorf("distilled head, K=%d: acceptance rate %.2f, want ≥ 0.8", k+1, through[k].AcceptanceRate())
					}
				}
				if calls := staged.Calls(); len(calls) == 0 {
					t.Fatalf("no staged calls recorded")
				} else {
					t.Logf("last run's calls: %+v", calls)
				}
			})
		}
	}
}

// TestStagedMTP: a qwen35 MTP head (feature: the last layer's output,
// read from the head stage) drafts through a plan exactly as through the
// whole engine: greedy tokens, same acceptance.
func TestStagedMTP(t *testing.T) {
	ctx := context.Background()
	c := featureConfig(model.Qwen35)
	c.Layers, c.LayerKinds = 4, c.LayerKinds[:4]
	src := synthBigram(t, c, 34)
	outNorm, _ := src.Tensor("output_norm.weight").Float32()
	// The distilled head of TestMTP: it proposes what the bigram target says.
	m := writeMTPModel(t, src, func(name string, dims []int64) []float32 {
		n := int(dims[0])
		if len(dims) == 2 {
			n *= int(dims[1])
		}
		v := make([]float32, n)
		switch {
		case strings.HasSuffix(name, "nextn.eh_proj.weight"):
			for r := 0; r < int(dims[1]); r++ {
				v[r*int(dims[0])+r] = 1
			}
		case strings.HasSuffix(name, "nextn.shared_head_norm.weight"):
			copy(v, outNorm)
		case strings.HasSuffix(name, "norm.weight") && !strings.HasSuffix(name, "nextn.hnorm.weight"):
			for i := range v {
				v[i] = 1
			}
		case strings.HasSuffix(name, "attn_output.weight"), strings.HasSuffix(name, "ffn_down.weight"), strings.HasSuffix(name, "nextn.hnorm.weight"):
		default:
			for i := range v {
				v[i] = 0.1 * float32(math.Sin(float64(i)))
			}
		}
		return v
	})
	target := newEngine(t, m, Options{Threads: 1})
	h, err := LoadMTP(target, m)
	if err != nil {
		t.Fatal(err)
	}
	s := newStaged(t, target, planFor(t, m, shard.Options{Stages: 2, AR: []int{5, 1}, CL: []int{128}}))
	for pi, p := range specPrompts(c.VocabSize)[:2] {
		want, err := target.Greedy(ctx, p, 64)
		if err != nil {
			t.Fatal(err)
		}
		if d := distinct(want); d < 4 {
			t.Fatalf("prompt %d: greedy output has only %d distinct tokens", pi, d)
		}
		for k := 1; k <= 4; k++ {
			_, wst, err := target.Speculate(ctx, h.Drafter(), p, 64, k)
			if err != nil {
				t.Fatal(err)
			}
			got, st, err := s.Speculate(ctx, &spoiler{Drafter: h.Drafter(), vocab: c.VocabSize}, p, 64, k)
			if err != nil {
				t.Fatalf("prompt %d, K=%d: %v", pi, k, err)
			}
			if err := sameTokens(got, want); err != nil {
				t.Fatalf("prompt %d, K=%d: staged MTP differs from greedy: %v", pi, k, err)
			}
			_, sst, err := s.Speculate(ctx, h.Drafter(), p, 64, k)
			if err != nil {
				t.Fatal(err)
			}
			if sst.Windows != wst.Windows || sst.Accepted != wst.Accepted {
				t.Fatalf("prompt %d, K=%d: staged %+v, whole %+v", pi, k, sst, wst)
			}
			t.Logf("prompt %d, K=%d: acceptance length %.2f (spoilt %.2f)", pi, k, sst.AcceptanceLength(), st.AcceptanceLength())
		}
	}
}

// featRecorder wraps a drafter and records every feature row and every
// proposal of the wrapped drafter. With seq set it is an oracle: it still
// runs the wrapped drafter (which must consume exactly the feature rows it
// is given) but proposes seq's continuation with one token per window
// spoilt, at a position cycling through 0…K, so every acceptance length
// occurs and the accepted rows' features are real ones.
type featRecorder struct {
	Drafter
	seq   []int32 // prompt and greedy continuation (oracle), or nil
	vocab int
	n, w  int // committed tokens, windows
	feats [][]float32
	props [][]int32
}

func (r *featRecorder) Start(prompt []int32, feats [][]float32) error {
	r.n = len(prompt)
	r.feats = append(r.feats, feats...)
	return r.Drafter.Start(prompt, feats)
}

func (r *featRecorder) Propose(last int32, k int) ([]int32, error) {
	d, err := r.Drafter.Propose(last, k)
	if err != nil {
		return nil, err
	}
	r.props = append(r.props, d)
	if r.seq == nil {
		return d, nil
	}
	o := slices.Clone(r.seq[r.n+1 : min(r.n+1+k, len(r.seq))])
	if i := r.w % (k + 1); i < len(o) {
		o[i] = (o[i] + 1) % int32(r.vocab)
	}
	r.w++
	return o, nil
}

func (r *featRecorder) Commit(last int32, draft []int32, accepted int, feats [][]float32) error {
	r.n += 1 + accepted
	r.feats = append(r.feats, feats...)
	return r.Drafter.Commit(last, draft, accepted, feats)
}

// same reports the first difference between two recordings.
func (r *featRecorder) same(o *featRecorder) error {
	if len(r.feats) != len(o.feats) {
		return fmt.Errorf("%d feature rows, want %d", len(r.feats), len(o.feats))
	}
	for i := range o.feats {
		if err := sameBits(r.feats[i], o.feats[i]); err != nil {
			return fmt.Errorf("feature row %d: %w", i, err)
		}
	}
	if len(r.props) != len(o.props) {
		return fmt.Errorf("%d proposals, want %d", len(r.props), len(o.props))
	}
	for i := range o.props {
		if !slices.Equal(r.props[i], o.props[i]) {
			return fmt.Errorf("proposal %d: %v, want %v", i, r.props[i], o.props[i])
		}
	}
	return nil
}
