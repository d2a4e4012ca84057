package runtime

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// TestStagedEaglet: Genie's eaglet dialog through a plan's target graphs
// (embeddings in, taps handed to the last stage, fc in last_hidden_states)
// and its draft graphs gives the whole model's greedy tokens for llama and
// qwen3 targets, for a random head and one built to reproduce its target,
// and several draft-len / n-branches / max-tokens shapes (Genie's example
// 6/8/32 among them). The reproducing head must be accepted most of the
// time, so the tree, the draft's cache and its features are right.
func TestStagedEaglet(t *testing.T) {
	n, prompts := specSize(32)
	ctx := context.Background()
	dialogs := []shard.Dialog{
		{Type: shard.Eaglet, DraftLen: 2, NBranches: 2, MaxTargetTokens: 4},
		{Type: shard.Eaglet, DraftLen: 4, NBranches: 3, MaxTargetTokens: 12},
		{Type: shard.Eaglet, DraftLen: 6, NBranches: 8, MaxTargetTokens: 32},
	}
	for _, arch := range []model.Arch{model.Llama, model.Qwen3} {
		for _, headKind := range []string{"random", "distilled"} {
			t.Run(string(arch)+"/"+headKind, func(t *testing.T) {
				c := featureConfig(arch)
				var tm *model.Model
				var target *Engine
				var head *Eagle3
				if headKind == "random" {
					tm = synthModel(t, c, 33)
					target = newEngine(t, tm, Options{Threads: 1})
					head = newEagle3(t, target, 7)
				} else {
					tm = synthBigram(t, c, 33)
					target = newEngine(t, tm, Options{Threads: 1})
					head = distilledEagle3(t, target, tm)
				}
				eh := head.EagletHead()
				for _, dl := range dialogs {
					t.Run(fmt.Sprintf("%d-%d-%d", dl.DraftLen, dl.NBranches, dl.MaxTargetTokens), func(t *testing.T) {
						// Stages 3+2+2: taps 2, 3, 4 inside the first stage, on
						// the second's first layer and inside it.
						p := planFor(t, tm, shard.Options{Stages: 3, AR: []int{dl.MaxTargetTokens, 1}, CL: []int{256}, Dialog: dl, EagletHead: &eh})
						if vs := shard.Check(p, shard.CheckEnv{}); len(vs) != 0 {
							t.Fatalf("plan violations: %v", vs)
						}
						s := newStaged(t, target, p)
						var sum SpecStats
						for pi, pr := range specPrompts(c.VocabSize)[:prompts] {
							want, err := target.Greedy(ctx, pr, n)
							if err != nil {
								t.Fatal(err)
							}
							got, st, err := s.SpeculateEaglet(ctx, head, pr, n)
							if err != nil {
								t.Fatalf("prompt %d: %v", pi, err)
							}
							if err := sameTokens(got, want); err != nil {
								t.Fatalf("prompt %d: eaglet differs from greedy: %v", pi, err)
							}
							if st.Tokens != n || st.TargetCalls != st.Windows+1 || st.Proposed < st.Windows {
								t.Fatalf("prompt %d: stats %+v", pi, st)
							}
							sum.Windows += st.Windows
							sum.Accepted += st.Accepted
							sum.Proposed += st.Proposed
							sum.Tokens += st.Tokens
						}
						t.Logf("acceptance length %.3f, tokens per target call %.3f, %d tree tokens per window",
							sum.AcceptanceLength(), sum.TokensPerWindow(), sum.Proposed/max(1, sum.Windows))
						if headKind == "distilled" && sum.AcceptanceLength() < 0.6*float64(dl.DraftLen) {
							t.Errorf("distilled head: acceptance length %.2f, want ≥ %.1f", sum.AcceptanceLength(), 0.6*float64(dl.DraftLen))
						}
					})
				}
			})
		}
	}
}

// TestStagedEagletChain: with one branch the eaglet tree is a chain, and
// Genie's bookkeeping (the draft re-reads the accepted path from target
// features through last_hidden_states = fc(taps), then chains on its own
// last_hidden_states) proposes exactly what the EAGLE-3 drafter proposes
// from the runtime's own feature capture, window by window, for a random
// head whose proposals depend on every feature.
func TestStagedEagletChain(t *testing.T) {
	n, prompts := specSize(32)
	ctx := context.Background()
	for _, arch := range []model.Arch{model.Llama, model.Qwen3} {
		t.Run(string(arch), func(t *testing.T) {
			c := featureConfig(arch)
			tm := synthModel(t, c, 33)
			target := newEngine(t, tm, Options{Threads: 1})
			head := newEagle3(t, target, 7)
			eh := head.EagletHead()
			const k = 3
			dl := shard.Dialog{Type: shard.Eaglet, DraftLen: k, NBranches: 1, MaxTargetTokens: 8}
			p := planFor(t, tm, shard.Options{Stages: 3, AR: []int{8, 1}, CL: []int{256}, Dialog: dl, EagletHead: &eh})
			s := newStaged(t, target, p)
			for pi, pr := range specPrompts(c.VocabSize)[:prompts] {
				var trees [][]int32
				s.eaglet.onTree = func(tree []eagletNode) {
					var toks []int32
					for i, nd := range tree[1:] {
						if nd.parent != i {
							t.Fatalf("one-branch tree is not a chain: %+v", tree)
						}
						toks = append(toks, nd.tok)
					}
					trees = append(trees, toks)
				}
				got, st, err := s.SpeculateEaglet(ctx, head, pr, n)
				if err != nil {
					t.Fatal(err)
				}
				s.eaglet.onTree = nil
				rec := &recorder{Drafter: head.Drafter()}
				want, wst, err := s.Speculate(ctx, rec, pr, n, k)
				if err != nil {
					t.Fatal(err)
				}
				if err := sameTokens(got, want); err != nil {
					t.Fatalf("prompt %d: %v", pi, err)
				}
				if len(trees) != len(rec.props) || st.Accepted != wst.Accepted {
					t.Fatalf("prompt %d: %d eaglet windows accepting %d, EAGLE-3 chain %d accepting %d", pi, len(trees), st.Accepted, len(rec.props), wst.Accepted)
				}
				for w := range trees {
					tr, prop := trees[w], rec.props[w]
					if m := len(tr); m > 0 && m < len(prop) && tr[m-1] == int32(c.EOS) {
						prop = prop[:m] // eaglet stops drafting a sequence at EOS
					}
					if len(prop) > len(tr) || !slices.Equal(prop, tr[:len(prop)]) {
						t.Fatalf("prompt %d, window %d: eaglet drafted %v, the EAGLE-3 drafter %v", pi, w, trees[w], rec.props[w])
					}
				}
			}
		})
	}
}
