package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

var archs = []model.Arch{model.Llama, model.Qwen2, model.Qwen3, model.Qwen3Next, model.Qwen35}

// eachArch runs f, in a subtest per architecture, on an engine over a tiny
// model of that architecture with weights of type typ.
func eachArch(t *testing.T, typ gguf.Type, seed uint64, f func(t *testing.T, cfg model.Config, e *Engine)) {
	for _, arch := range archs {
		t.Run(string(arch), func(t *testing.T) {
			cfg := synth.Config(arch, false)
			f(t, cfg, newEngine(t, tinyModel(t, cfg, typ, seed), Options{}))
		})
	}
}

// TestBatchedEqualsPerToken: Forward on N tokens, in any batch size and on
// any thread count, gives bit-identical logits to N single-token calls.
func TestBatchedEqualsPerToken(t *testing.T) {
	types := []gguf.Type{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q1_0, gguf.Q2_0}
	for _, arch := range archs {
		for _, typ := range types {
			if testing.Short() && typ != gguf.F32 && typ != gguf.Q8_0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", arch, typ), func(t *testing.T) {
				cfg := synth.Config(arch, true)
				m := tinyModel(t, cfg, typ, 1)
				toks := randomTokens(13, cfg.VocabSize, 2)

				for _, kv := range []bool{false, true} {
					if kv && typ != gguf.F32 {
						continue
					}
					want := stepByStep(t, newEngine(t, m, Options{Threads: 1, Batch: 1, KVF16: kv}).NewState(), toks)
					for _, opt := range []Options{{Threads: 2, Batch: 32}, {Threads: 3, Batch: 5}, {Threads: 1, Batch: 13}} {
						opt.KVF16 = kv
						pe := newEngine(t, m, opt)
						pe.minWork = 0 // split every matmul, attention and DeltaNet step
						got, err := pe.NewState().ForwardAll(toks)
						if err != nil {
							t.Fatal(err)
						}
						for i := range want {
							if err := sameBits(got[i], want[i]); err != nil {
								t.Fatalf("%+v: token %d: %v", opt, i, err)
							}
						}
					}
				}
			})
		}
	}
}

// stepByStep returns st's logits after each of toks, fed one at a time:
// the reference batched runs must match bit for bit.
func stepByStep(t *testing.T, st *State, toks []int32) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, tok := range toks {
		l, err := st.Forward([]int32{tok})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// TestPanels: Q8_0, F16 and BF16 prompt products through weight panels
// (int8.MulQ8_0, kernels.MulF16, kernels.MulBF16; batches from
// panelTokens up, token groups cut short, rows dealt to two workers in
// chunks that are not whole panels) give the same bits as single-token
// steps, which take the row-by-row dot products.
func TestPanels(t *testing.T) {
	for _, c := range []struct {
		arch model.Arch
		typ  gguf.Type
	}{{model.Llama, gguf.Q8_0}, {model.Qwen35, gguf.Q8_0}, {model.Llama, gguf.F16}, {model.Llama, gguf.BF16}, {model.Qwen35, gguf.BF16}} {
		arch := c.arch
		cfg := synth.Config(arch, true)
		m := tinyModel(t, cfg, c.typ, 1)
		toks := randomTokens(19, cfg.VocabSize, 2)
		want := stepByStep(t, newEngine(t, m, Options{Threads: 1, Batch: 1}).NewState(), toks)
		for _, batch := range []int{panelTokens - 1, panelTokens, 5, 19} {
			for _, threads := range []int{1, 2} {
				e := newEngine(t, m, Options{Threads: threads, Batch: batch})
				e.minWork = 0 // split every product, into chunks of 128/16 = 8 rows
				got, err := e.NewState().ForwardAll(toks)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if err := sameBits(got[i], want[i]); err != nil {
						t.Fatalf("%s %s, batch %d, %d threads: token %d: %v", arch, c.typ, batch, threads, i, err)
					}
				}
			}
		}
	}
}

// TestStatePrefixClone: continuing a cloned state equals continuing the
// original, and truncation rolls back exactly (with snapshots on hybrids).
func TestStateCloneTruncate(t *testing.T) {
	eachArch(t, gguf.F32, 3, func(t *testing.T, cfg model.Config, e *Engine) {
		toks := randomTokens(10, cfg.VocabSize, 4)
		st := e.NewState()
		st.SetRollback(4)
		if _, err := st.Forward(toks[:6]); err != nil {
			t.Fatal(err)
		}
		c := st.Clone()
		want, err := st.ForwardAll(toks[6:])
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.ForwardAll(toks[6:])
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if err := sameBits(got[i], want[i]); err != nil {
				t.Fatalf("clone, token %d: %v", i, err)
			}
		}
		// Roll back three positions and replay.
		if err := st.Truncate(7); err != nil {
			t.Fatal(err)
		}
		if st.Len() != 7 {
			t.Fatalf("Len after Truncate(7) = %d", st.Len())
		}
		again, err := st.ForwardAll(toks[7:])
		if err != nil {
			t.Fatal(err)
		}
		for i := range again {
			if err := sameBits(again[i], want[i+1]); err != nil {
				t.Fatalf("after truncate, token %d: %v", i, err)
			}
		}
		// Beyond the snapshots a hybrid cannot roll back; a dense model can.
		err = st.Truncate(2)
		if cfg.Hybrid() != (err != nil) {
			t.Fatalf("Truncate(2) on %s: %v", cfg.Arch, err)
		}
		if err := st.Truncate(0); err != nil {
			t.Fatal(err)
		}
		first, err := st.Forward(toks[:1])
		if err != nil {
			t.Fatal(err)
		}
		fresh, _ := e.NewState().Forward(toks[:1])
		if err := sameBits(first, fresh); err != nil {
			t.Fatalf("after Truncate(0): %v", err)
		}
	})
}

// TestRunLayersStages: running the layers stage by stage with an explicit
// causal mask and positions equals the whole-model forward.
func TestRunLayersStages(t *testing.T) {
	eachArch(t, gguf.Q8_0, 5, func(t *testing.T, cfg model.Config, e *Engine) {
		toks := randomTokens(9, cfg.VocabSize, 6)
		want, err := e.NewState().ForwardAll(toks)
		if err != nil {
			t.Fatal(err)
		}
		st := e.NewState()
		h := cfg.Hidden
		var got [][]float32
		for _, chunk := range [][]int32{toks[:4], toks[4:]} {
			x := make([]float32, len(chunk)*h)
			if err := e.Embed(chunk, x); err != nil {
				t.Fatal(err)
			}
			past := st.Len()
			pos := make([]int32, len(chunk))
			for i := range pos {
				pos[i] = int32(past + i)
			}
			mask := causalMask(past, len(chunk))
			for l := 0; l < e.Layers(); l++ {
				if err := st.RunLayers(l, l+1, x, pos, mask); err != nil {
					t.Fatal(err)
				}
			}
			logits := make([]float32, len(chunk)*cfg.VocabSize)
			if err := st.Head(x, logits); err != nil {
				t.Fatal(err)
			}
			for i := range chunk {
				got = append(got, logits[i*cfg.VocabSize:(i+1)*cfg.VocabSize])
			}
		}
		for i := range want {
			if err := sameBits(got[i], want[i]); err != nil {
				t.Fatalf("token %d: %v", i, err)
			}
		}
	})
}

// TestTreeMask: with an explicit mask, a token that does not see a slot is
// unaffected by what the slot holds. Two sibling drafts verified in one
// call give the same logits as each verified alone.
func TestTreeMask(t *testing.T) {
	cfg := synth.Config(model.Qwen3, false)
	e := newEngine(t, tinyModel(t, cfg, gguf.F32, 8), Options{})
	prompt := randomTokens(5, cfg.VocabSize, 9)
	base := e.NewState()
	if _, err := base.Forward(prompt); err != nil {
		t.Fatal(err)
	}
	a, b := int32(10), int32(20)
	one := func(tok int32) []float32 {
		st := base.Clone()
		l, err := st.Forward([]int32{tok})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	wantA, wantB := one(a), one(b)

	st := base.Clone()
	past, n := st.Len(), st.Len()+2
	mask := make([]bool, 2*n)
	for j := 0; j < past; j++ {
		mask[j], mask[n+j] = true, true
	}
	mask[past] = true     // a sees itself
	mask[n+past+1] = true // b sees itself, not a
	x := make([]float32, 2*cfg.Hidden)
	if err := e.Embed([]int32{a, b}, x); err != nil {
		t.Fatal(err)
	}
	if err := st.RunLayers(0, e.Layers(), x, []int32{int32(past), int32(past)}, mask); err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, 2*cfg.VocabSize)
	if err := st.Head(x, logits); err != nil {
		t.Fatal(err)
	}
	if err := sameBits(logits[:cfg.VocabSize], wantA); err != nil {
		t.Fatalf("branch a: %v", err)
	}
	if err := sameBits(logits[cfg.VocabSize:], wantB); err != nil {
		t.Fatalf("branch b: %v", err)
	}

	// Accept branch b: after compaction the state continues exactly as
	// if b alone had been fed.
	alone := base.Clone()
	if _, err := alone.Forward([]int32{b}); err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(past, []int{past + 1}); err != nil {
		t.Fatal(err)
	}
	next := []int32{30, 31}
	want, err := alone.ForwardAll(next)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.ForwardAll(next)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if err := sameBits(got[i], want[i]); err != nil {
			t.Fatalf("after Compact, token %d: %v", i, err)
		}
	}
	if err := st.Compact(past, []int{past + 2, past + 1}); err == nil {
		t.Errorf("Compact accepted slots out of order")
	}
}

// TestGreedyMatchesArgmaxOfLogits: Greedy's tokens are the argmaxes of
// the teacher-forced logits of its own output (speculative acceptance of
// a perfect draft accepts everything).
func TestGreedyConsistent(t *testing.T) {
	eachArch(t, gguf.Q8_0, 10, func(t *testing.T, cfg model.Config, e *Engine) {
		prompt := randomTokens(4, cfg.VocabSize, 12)
		ids, err := e.Greedy(context.Background(), prompt, 12)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := e.Logits(context.Background(), append(append([]int32(nil), prompt...), ids[:len(ids)-1]...))
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			if got := Argmax(rows[len(prompt)-1+i]); got != id {
				t.Fatalf("step %d: greedy %d, teacher-forced argmax %d", i, id, got)
			}
		}
	})
}

func TestErrors(t *testing.T) {
	cfg := synth.Config(model.Llama, false)
	e := newEngine(t, tinyModel(t, cfg, gguf.F32, 13), Options{Context: 8})
	ctx := context.Background()
	cases := []struct {
		name string
		run  func() error
	}{
		{"token too large", func() error { _, err := e.Greedy(ctx, []int32{int32(cfg.VocabSize)}, 1); return err }},
		{"negative token", func() error { _, err := e.NewState().Forward([]int32{-1}); return err }},
		{"empty prompt", func() error { _, err := e.Greedy(ctx, nil, 4); return err }},
		{"prompt longer than context", func() error { _, err := e.NewState().Forward(make([]int32, 9)); return err }},
		{"generation past context", func() error { _, err := e.Greedy(ctx, make([]int32, 4), 6); return err }},
		{"bad layer range", func() error { return e.NewState().RunLayers(1, 5, make([]float32, cfg.Hidden), nil, nil) }},
		{"bad mask", func() error { return e.NewState().RunLayers(0, 1, make([]float32, cfg.Hidden), nil, []bool{false}) }},
	}
	for _, c := range cases {
		if err := c.run(); err == nil {
			t.Errorf("%s: no error", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	// Exactly at the context limit works.
	if _, err := e.Greedy(ctx, make([]int32, 4), 5); err != nil {
		t.Errorf("4+5-1 = 8 positions: %v", err)
	}

	// A missing tensor is named.
	m := tinyModel(t, cfg, gguf.F32, 14)
	var kept []*model.Tensor
	for _, tt := range m.Tensors {
		if tt.Name != "blk.1.ffn_up.weight" {
			kept = append(kept, tt)
		}
	}
	m.Tensors = kept
	m2 := &model.Model{Config: m.Config, Tensors: kept}
	if _, err := New(m2, Options{}); err == nil {
		t.Errorf("missing tensor: no error")
	} else {
		t.Logf("missing tensor: %v", err)
	}
}

// TestSpeculativeEqualsGreedy: decoding with Verify over drafts that are
// partly right gives exactly Greedy's tokens, on every architecture
// (rollback of KV and of DeltaNet state included).
func TestSpeculativeEqualsGreedy(t *testing.T) {
	eachArch(t, gguf.Q8_0, 30, func(t *testing.T, cfg model.Config, e *Engine) {
		prompt := randomTokens(5, cfg.VocabSize, 31)
		const n = 24
		want, err := e.Greedy(context.Background(), prompt, n)
		if err != nil {
			t.Fatal(err)
		}
		st := e.NewState()
		logits, err := st.Forward(prompt)
		if err != nil {
			t.Fatal(err)
		}
		got := []int32{Argmax(logits)}
		accepts := 0
		for step := 0; len(got) < n; step++ {
			// Draft K = 1 + step%4 tokens: the true continuation with the
			// token at index step%5 (if inside the draft) replaced.
			k := 1 + step%4
			var draft []int32
			for i := 0; i < k && len(got)+i < n; i++ {
				d := want[len(got)+i]
				if i == step%5 {
					d = (d + 1) % int32(cfg.VocabSize)
				}
				draft = append(draft, d)
			}
			if len(draft) == 0 {
				break
			}
			a, next, err := st.Verify(got[len(got)-1], draft)
			if err != nil {
				t.Fatal(err)
			}
			accepts += a
			got = append(got, draft[:a]...)
			got = append(got, next)
			if st.Len() != len(prompt)+len(got)-1 {
				t.Fatalf("state holds %d positions, want %d", st.Len(), len(prompt)+len(got)-1)
			}
		}
		got = got[:n]
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("token %d: speculative %d, greedy %d\n%v\n%v", i, got[i], want[i], got, want)
			}
		}
		if accepts == 0 {
			t.Fatalf("no draft token was ever accepted")
		}
	})
}

// TestStateAccessors: KV grows by one row per token in attention layers;
// a DeltaNet conv state holds exactly the last K−1 raw qkv rows.
func TestStateAccessors(t *testing.T) {
	cfg := synth.Config(model.Qwen35, false)
	e := newEngine(t, tinyModel(t, cfg, gguf.F32, 50), Options{})
	st := e.NewState()
	toks := randomTokens(6, cfg.VocabSize, 51)
	if _, err := st.Forward(toks); err != nil {
		t.Fatal(err)
	}
	kvDim := cfg.KVHeads * cfg.HeadDim
	for i, kind := range cfg.LayerKinds {
		k, v := st.KV(i)
		conv, ssm := st.DeltaNet(i)
		if kind == model.Attention {
			if len(k) != 6*kvDim || len(v) != 6*kvDim || conv != nil || ssm != nil {
				t.Errorf("layer %d: len k %d v %d, conv %d ssm %d", i, len(k), len(v), len(conv), len(ssm))
			}
			continue
		}
		if k != nil || len(conv) != (cfg.ConvKernel-1)*cfg.ConvDim() || len(ssm) != cfg.SSMValueHeads*cfg.SSMKeyDim*cfg.SSMValueDim {
			t.Errorf("layer %d: len k %d, conv %d, ssm %d", i, len(k), len(conv), len(ssm))
		}
	}
	// The newest conv row of layer 0 is attn_qkv applied to the normed
	// embedding of the last token.
	x := make([]float32, cfg.Hidden)
	if err := e.Embed(toks[5:], x); err != nil {
		t.Fatal(err)
	}
	l := &e.layers[0]
	rmsNorm(x, x, l.attnNorm, cfg.RMSEps)
	var in acts
	in.reset(x, 1, cfg.Hidden)
	want := make([]float32, cfg.ConvDim())
	if err := e.matmul(l.wqkv, &in, want); err != nil {
		t.Fatal(err)
	}
	conv, _ := st.DeltaNet(0)
	if err := sameBits(conv[(cfg.ConvKernel-2)*cfg.ConvDim():], want); err != nil {
		t.Fatalf("newest conv row: %v", err)
	}
}

// TestCompactHybrid: a hybrid State compacts only to a chain of slots.
func TestCompactHybrid(t *testing.T) {
	cfg := synth.Config(model.Qwen35, false)
	e := newEngine(t, tinyModel(t, cfg, gguf.F32, 60), Options{})
	st := e.NewState()
	st.SetRollback(2)
	if _, err := st.Forward(randomTokens(5, cfg.VocabSize, 61)); err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(3, []int{4}); err == nil {
		t.Fatal("non-contiguous compaction of DeltaNet state accepted")
	}
	if err := st.Compact(3, []int{3}); err != nil {
		t.Fatal(err)
	}
	if st.Len() != 4 {
		t.Fatalf("Len %d after Compact(3, [3]), want 4", st.Len())
	}
}

// TestForwardContext: a prompt stops at the next batch once its context
// is done, and with a live context gives Forward's logits.
func TestForwardContext(t *testing.T) {
	cfg := synth.Config(model.Llama, false)
	e := newEngine(t, tinyModel(t, cfg, gguf.Q8_0, 14), Options{Batch: 2})
	prompt := randomTokens(6, cfg.VocabSize, 15)
	want, err := e.NewState().Forward(prompt)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.NewState().ForwardContext(context.Background(), prompt)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("live context: %v, logits equal %v", err, slices.Equal(got, want))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := e.Observe(func(string, []float32, int, int) { cancel() })
	defer stop()
	st := e.NewState()
	if _, err := st.ForwardContext(ctx, prompt); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled during the first batch: %v", err)
	}
	if st.Len() != 2 {
		t.Errorf("state holds %d positions after the first batch of 2, want 2", st.Len())
	}
}

// TestCacheHoldsPositionsUsed: a greedy run and a speculative one size
// every attention layer's KV cache once, for the positions they fill
// (prompt, generated tokens, a draft window), instead of growing it by
// doubling, which holds up to twice those positions plus the outgrown
// copies; and a prompt pass alone holds its own positions.
func TestCacheHoldsPositionsUsed(t *testing.T) {
	cfg := synth.Config(model.Qwen35, false) // hybrid: DeltaNet layers hold no KV
	e := newEngine(t, tinyModel(t, cfg, gguf.F32, 5), Options{})
	kv := cfg.KVHeads * cfg.HeadDim
	caps := func(s *State) (attn int, want []int) {
		for _, ls := range s.layers {
			if ls.kind == model.Attention {
				attn++
				for h := range ls.k {
					want = append(want, len(ls.k)*cap(ls.k[h]), len(ls.v)*cap(ls.v[h]))
				}
			}
		}
		return attn, want
	}
	check := func(what string, s *State, positions int) {
		t.Helper()
		attn, got := caps(s)
		require.Positive(t, attn)
		for _, c := range got {
			require.Equal(t, positions*kv, c, "%s: a cache holds %d floats, want %d positions' %d", what, c, positions, positions*kv)
		}
	}
	prompt := randomTokens(3, cfg.VocabSize, 6)
	const n, k = 6, 2

	s := e.NewState()
	require.NoError(t, s.Generate(context.Background(), prompt, n, nil))
	check("Generate", s, len(prompt)+n-1)

	s = e.NewState()
	_, err := s.Forward(randomTokens(13, cfg.VocabSize, 7))
	require.NoError(t, err)
	check("Forward", s, 13)

	s = e.NewState()
	d, err := NewDraftModel(e, e)
	require.NoError(t, err)
	_, _, err = s.Speculate(context.Background(), d, prompt, n, k)
	require.NoError(t, err)
	check("Speculate", s, len(prompt)+n+k)
}

// causalMask returns the mask RunLayers uses when given nil: t new tokens
// after past cached positions, token i seeing slots 0…past+i.
func causalMask(past, t int) []bool {
	n := past + t
	m := make([]bool, t*n)
	for i := 0; i < t; i++ {
		for j := 0; j <= past+i; j++ {
			m[i*n+j] = true
		}
	}
	return m
}
