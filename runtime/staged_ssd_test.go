package runtime

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

func randomFloats(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 5))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

// ssdOptions gives random forecast rows and a random forecast prefix.
func ssdOptions(c model.Config, p *shard.Plan, seed uint64) SSDOptions {
	o := SSDOptions{Forecast: randomFloats(p.Dialog.ForecastTokenCount*c.Hidden, seed)}
	o.PrefixKeys, o.PrefixValues = make([][]float32, c.Layers), make([][]float32, c.Layers)
	for l := range c.Layers {
		n := c.KVHeads * p.Dialog.ForecastPrefix * c.HeadDim
		o.PrefixKeys[l], o.PrefixValues[l] = randomFloats(n, seed+uint64(2*l+1)), randomFloats(n, seed+uint64(2*l+2))
	}
	return o
}

// TestStagedSSD: Genie's ssd-q1 bookkeeping through the plan (forecast
// prefix restored and hidden from the prompt and the tree, forecast
// tokens embedded from their rows, a draft tree per step committed by a
// selection mask) gives exactly the whole model's greedy tokens, for
// random forecast rows and prefixes, which only change what is proposed.
func TestStagedSSD(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		arch     model.Arch
		branches []int
		count    int
		prefix   int
		ar       []int
	}{
		{model.Llama, []int{1}, 1, 16, []int{4, 1}},
		{model.Llama, []int{3}, 2, 8, []int{8, 1}},
		{model.Llama, []int{2, 2}, 4, 16, []int{32, 8}},
		{model.Qwen3, []int{3, 2}, 2, 4, []int{32}},
		{model.Qwen2, []int{2, 1, 1}, 3, 0, []int{32, 4}},
	} {
		c := stagedConfig(tc.arch, 3)
		m := synthModel(t, c, 3)
		e := newEngine(t, m, Options{Threads: 1})
		d := shard.Dialog{Type: shard.SSD, ForecastTokenCount: tc.count, Branches: tc.branches, ForecastPrefix: tc.prefix, ForecastPrefixName: "forecast-prefix"}
		p := planFor(t, m, shard.Options{LayersPerStage: 2, AR: tc.ar, CL: []int{128}, Dialog: d})
		if vs := shard.Check(p, shard.CheckEnv{}); len(vs) != 0 {
			t.Fatalf("%s %v: plan violations %v", tc.arch, tc.branches, vs)
		}
		s := newStaged(t, e, p)
		for seed := range uint64(3) {
			prompt := randomTokens(5+int(seed)*4, c.VocabSize, 40+seed)
			const n = 24
			want, err := e.Greedy(ctx, prompt, n)
			if err != nil {
				t.Fatal(err)
			}
			got, st, err := s.SpeculateSSD(ctx, ssdOptions(c, p, seed), prompt, n)
			if err != nil {
				t.Fatalf("%s %v: %v", tc.arch, tc.branches, err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s %v seed %d: ssd %v\ngreedy %v", tc.arch, tc.branches, seed, got, want)
			}
			nodes := p.Dialog.Nodes
			if st.Windows < 2 || st.Proposed != (st.Windows-1)*(nodes-1) || st.Accepted > st.Proposed || st.Tokens != n {
				t.Errorf("%s %v: stats %+v (nodes %d)", tc.arch, tc.branches, st, nodes)
			}
			// Every token comes from the first call or a window: the
			// target's own token plus the accepted drafts.
			if emitted := 1 + st.Windows + st.Accepted; emitted < n {
				t.Errorf("%s %v: %d windows and %d accepted drafts emit %d tokens, want ≥ %d", tc.arch, tc.branches, st.Windows, st.Accepted, emitted, n)
			}
		}
	}
}

// TestStagedSSDPrefixHidden: the prompt and the draft tree never see the
// forecast prefix, the forecast rows do. With a prefix of huge values a
// tree row that saw it would give other logits; the forecast rows'
// logits change with the prefix.
func TestStagedSSDPrefixHidden(t *testing.T) {
	ctx := context.Background()
	c := stagedConfig(model.Llama, 2)
	m := synthModel(t, c, 9)
	e := newEngine(t, m, Options{Threads: 1})
	d := shard.Dialog{Type: shard.SSD, ForecastTokenCount: 2, Branches: []int{2}, ForecastPrefix: 8, ForecastPrefixName: "fp"}
	p := planFor(t, m, shard.Options{LayersPerStage: 1, AR: []int{16, 1}, CL: []int{64}, Dialog: d})
	prompt := randomTokens(6, c.VocabSize, 3)
	want, err := e.Greedy(ctx, prompt, 12)
	if err != nil {
		t.Fatal(err)
	}
	var drafts [][]int32
	for _, scale := range []float32{0, 1000} {
		o := ssdOptions(c, p, 4)
		for l := range o.PrefixValues {
			for i := range o.PrefixValues[l] {
				o.PrefixValues[l][i] *= scale
			}
		}
		s := newStaged(t, e, p)
		got, _, err := s.SpeculateSSD(ctx, o, prompt, 12)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("prefix ×%g: ssd %v, greedy %v", scale, got, want)
		}
		// The first forecast row's logits decide the first draft.
		o2 := o
		s2 := newStaged(t, e, p)
		s2.Reset()
		s2.ssd = stagedSSD{forecast: o2.Forecast, prefix: d.ForecastPrefix, opts: &o2}
		s2.nValid = d.ForecastPrefix
		v, _, err := s2.ssdVariant(len(prompt), true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s2.ssdCall(v, prompt, nil, len(prompt)); err != nil {
			t.Fatal(err)
		}
		if err := s2.Commit(nil); err != nil {
			t.Fatal(err)
		}
		lg, err := s2.ssdStep([]int32{want[0], int32(c.VocabSize), int32(c.VocabSize + 1)}, nil, 1, []bool{true, false, false})
		if err != nil {
			t.Fatal(err)
		}
		drafts = append(drafts, topK(lg[1], 8))
	}
	if slices.Equal(drafts[0], drafts[1]) {
		t.Errorf("forecast rows ignore the prefix: top-8 %v with both prefixes", drafts[0])
	}
}

// TestStagedSSDErrors: what an ssd-q1 decode refuses.
func TestStagedSSDErrors(t *testing.T) {
	ctx := context.Background()
	c := stagedConfig(model.Llama, 2)
	m := synthModel(t, c, 9)
	e := newEngine(t, m, Options{Threads: 1})
	d := shard.Dialog{Type: shard.SSD, ForecastTokenCount: 2, Branches: []int{2}, ForecastPrefix: 8, ForecastPrefixName: "fp"}
	p := planFor(t, m, shard.Options{LayersPerStage: 1, AR: []int{16, 1}, CL: []int{64}, Dialog: d})
	basic := planFor(t, m, shard.Options{LayersPerStage: 1, AR: []int{16, 1}, CL: []int{64}})
	prompt := randomTokens(6, c.VocabSize, 3)
	good := ssdOptions(c, p, 1)
	for _, tc := range []struct {
		name string
		p    *shard.Plan
		o    SSDOptions
		want string
	}{
		{"basic plan", basic, good, `dialog "basic", not ssd-q1`},
		{"rows", p, SSDOptions{Forecast: good.Forecast[:c.Hidden]}, "forecast-token-count 2 × hidden 64"},
		{"prefix", p, SSDOptions{Forecast: good.Forecast, PrefixKeys: [][]float32{{1}, nil}}, "forecast prefix keys of layer 0: 1 values, want 256"},
	} {
		_, _, err := newStaged(t, e, tc.p).SpeculateSSD(ctx, tc.o, prompt, 4)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
