package shard

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

const mib = 1 << 20

// llamaConfig is a Llama-3-8B-like dense config: 32 layers, GQA 32/8, head 128.
func llamaConfig() model.Config {
	c := model.Config{
		Arch: model.Llama, VocabSize: 128256, Hidden: 4096, Layers: 32, FFN: 14336,
		Heads: 32, KVHeads: 8, HeadDim: 128, ContextLength: 8192, RopeDim: 128,
		RopeTheta: 500000, BOS: 128000, EOS: 128001,
	}
	c.LayerKinds = make([]model.LayerKind, c.Layers)
	return c
}

// qwen35Config is a Qwen3.5-like hybrid: every 4th layer is gated
// attention (head 256, partial rotary 64), the others Gated DeltaNet.
func qwen35Config() model.Config {
	c := model.Config{
		Arch: model.Qwen35, VocabSize: 248320, Hidden: 1024, Layers: 24, FFN: 3584,
		Heads: 8, KVHeads: 2, HeadDim: 256, ContextLength: 262144, RopeDim: 64, RopeNeox: true,
		QKNorm: true, AttnOutputGate: true, TiedEmbeddings: true,
		ConvKernel: 4, SSMKeyHeads: 16, SSMValueHeads: 16, SSMKeyDim: 128, SSMValueDim: 128,
	}
	for i := range c.Layers {
		k := model.DeltaNet
		if i%4 == 3 {
			k = model.Attention
		}
		c.LayerKinds = append(c.LayerKinds, k)
	}
	return c
}

func uniform(n int, b int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = b
	}
	return s
}

func mustPlan(t *testing.T, cfg model.Config, layer []int64, head, embed int64, o Options) *Plan {
	t.Helper()
	p, err := NewPlan(cfg, Sizes{Layers: layer, Head: head, Embed: embed}, "llama", o)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	return p
}

func layerCounts(p *Plan) []int {
	var n []int
	for _, s := range p.Stages {
		n = append(n, s.LastLayer-s.FirstLayer+1)
	}
	return n
}

func TestSplitModes(t *testing.T) {
	cfg := llamaConfig()
	tests := []struct {
		name  string
		opts  Options
		layer []int64
		want  []int
	}{
		{"layers per stage 4", Options{LayersPerStage: 4}, uniform(32, 200*mib), []int{4, 4, 4, 4, 4, 4, 4, 4}},
		{"layers per stage 10", Options{LayersPerStage: 10}, uniform(32, 200*mib), []int{10, 10, 10, 2}},
		{"5 stages", Options{Stages: 5}, uniform(32, 200*mib), []int{7, 7, 6, 6, 6}},
		{"1 stage", Options{Stages: 1, MaxStageBytes: 1 << 40}, uniform(32, 200*mib), []int{32}},
		// 32 × 200 MiB + 2 × 500 MiB = 7400 MiB → 4 stages under 2 GiB;
		// 8+8+8+8 would put 2100 MiB in the first, so 7 9 9 7 (max 1900).
		{"bytes default 2GiB", Options{}, uniform(32, 200*mib), []int{7, 9, 9, 7}},
		// Under 1 GiB the last layer with the head (700 MiB) takes one more
		// layer at most: 8 stages, none above 1000 MiB.
		{"bytes 1GiB", Options{MaxStageBytes: 1 << 30}, uniform(32, 200*mib), []int{2, 5, 5, 5, 5, 5, 4, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPlan(t, cfg, tt.layer, 500*mib, 500*mib, tt.opts)
			if got := layerCounts(p); !slices.Equal(got, tt.want) {
				t.Errorf("layers per stage %v, want %v", got, tt.want)
			}
			var sum int64
			for _, s := range p.Stages {
				sum += s.Bytes
			}
			if want := int64(32*200*mib + 1000*mib); sum != want {
				t.Errorf("stage bytes sum to %d, want %d", sum, want)
			}
			if !p.Stages[0].Embedding || !p.Stages[len(p.Stages)-1].Head {
				t.Errorf("embedding/head not on first/last stage")
			}
		})
	}
}

// bruteBalance finds, by trying every partition, the fewest runs under
// limit and the smallest possible largest run for that count.
func bruteBalance(cost []int64, limit int64) (runs int, largest int64) {
	n := len(cost)
	runs, largest = n+1, 0
	for mask := 0; mask < 1<<(n-1); mask++ {
		var sum, big int64
		k := 1
		for i, c := range cost {
			if i > 0 && mask&(1<<(i-1)) != 0 {
				big = max(big, sum)
				sum = 0
				k++
			}
			sum += c
		}
		big = max(big, sum)
		if big > limit {
			continue
		}
		if k < runs || (k == runs && big < largest) {
			runs, largest = k, big
		}
	}
	return runs, largest
}

func TestBalanceMatchesBruteForce(t *testing.T) {
	// Deterministic pseudo-random layer sizes (an LCG, no global state).
	x := uint64(12345)
	rnd := func(n int64) int64 { x = x*6364136223846793005 + 1442695040888963407; return int64(x>>33)%n + 1 }
	for trial := range 300 {
		n := int(rnd(12))
		cost := make([]int64, n)
		for i := range cost {
			cost[i] = rnd(100)
		}
		limit := slices.Max(cost) + rnd(250)
		sizes := balance(cost, limit)
		var got int64
		i := 0
		for _, s := range sizes {
			var sum int64
			for range s {
				sum += cost[i]
				i++
			}
			got = max(got, sum)
		}
		wantRuns, wantLargest := bruteBalance(cost, limit)
		if i != n || len(sizes) != wantRuns || got != wantLargest {
			t.Fatalf("trial %d: cost %v limit %d: %d runs largest %d (covering %d), want %d runs largest %d",
				trial, cost, limit, len(sizes), got, i, wantRuns, wantLargest)
		}
	}
}

func TestNewPlanErrors(t *testing.T) {
	cfg := llamaConfig()
	bad := cfg
	bad.LayerKinds = bad.LayerKinds[:3]
	tests := []struct {
		name  string
		cfg   model.Config
		layer []int64
		opts  Options
		want  string
	}{
		{"more stages than layers", cfg, uniform(32, mib), Options{Stages: 33}, "33 stages for 32 layers"},
		{"both split modes", cfg, uniform(32, mib), Options{Stages: 4, LayersPerStage: 8}, "choose one way"},
		{"AR == CL without arc", cfg, uniform(32, mib), Options{AR: []int{128}, CL: []int{128}}, "AR 128 == CL 128"},
		{"AR > CL", cfg, uniform(32, mib), Options{AR: []int{256}, CL: []int{128}, ARc: true}, "AR 256 > CL 128"},
		{"single layer over limit", cfg, append(uniform(31, mib), 3<<30), Options{}, "layer 31 with the output head is 3.49 GiB on the device (4bit container), over the 2.00 GiB"},
		{"embedding layer over limit", cfg, uniform(32, mib), Options{MaxStageBytes: 100 * mib}, "layer 0 with the token embedding"},
		{"wrong layer sizes", cfg, uniform(30, mib), Options{}, "30 layer sizes (0 in the qmodel) for 32 layers"},
		{"bad config", bad, uniform(32, mib), Options{}, "3 layer kinds for 32 layers"},
		{"duplicate AR", cfg, uniform(32, mib), Options{AR: []int{1, 1}}, "AR 1 listed twice"},
		{"ssd branches > forecast", cfg, uniform(32, mib), Options{Dialog: Dialog{Type: SSD, ForecastTokenCount: 1, Branches: []int{2, 2}}}, "len(branches) ≤ forecast-token-count"},
		{"unknown dialog", cfg, uniform(32, mib), Options{Dialog: Dialog{Type: "beam"}}, `unknown dialog type "beam"`},
		{"lade ngram", cfg, uniform(32, mib), Options{Dialog: Dialog{Type: LADE, Window: 4, NGram: 1}}, "ngram = 1"},
		{"positional", cfg, uniform(32, mib), Options{Positional: "alibi"}, `unknown positional encoding "alibi"`},
		{"layer types", cfg, uniform(32, mib), Options{LayerTypes: make([]gguf.Type, 5)}, "5 layer types for 32 layers"},
		{"CL above the context", cfg, uniform(32, mib), Options{CL: []int{cfg.ContextLength * 2}}, "CL above the model's context length"},
		{"CL of 2^40", cfg, uniform(32, mib), Options{CL: []int{1 << 40}}, "1…16777216"},
		{"forecast prefix outside the bundle", cfg, uniform(32, mib), Options{Dialog: Dialog{Type: SSD, ForecastTokenCount: 4, Branches: []int{2}, ForecastPrefix: 8, ForecastPrefixName: "../x"}}, `forecast-prefix-name name "../x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPlan(tt.cfg, Sizes{Layers: tt.layer, Head: 500 * mib, Embed: 500 * mib}, "m", tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestGraphNames(t *testing.T) {
	tests := []struct {
		stages int
		want   []string
	}{
		{8, []string{"m_ar128_cl4096_01_of_08", "m_ar128_cl4096_08_of_08"}},
		{12, []string{"m_ar128_cl4096_01_of_12", "m_ar128_cl4096_12_of_12"}},
		{100, []string{"m_ar128_cl4096_001_of_100", "m_ar128_cl4096_100_of_100"}},
	}
	for _, tt := range tests {
		var names []string
		for i := range tt.stages {
			names = append(names, GraphName("m", 128, 4096, i, tt.stages))
		}
		if names[0] != tt.want[0] || names[len(names)-1] != tt.want[1] {
			t.Errorf("%d stages: %s … %s, want %v", tt.stages, names[0], names[len(names)-1], tt.want)
		}
		if !sort.StringsAreSorted(names) {
			t.Errorf("%d stages: names do not sort in stage order", tt.stages)
		}
	}
	if got := SanitizeName("Llama-3.2 1B"); got != "Llama_3_2_1B" {
		t.Errorf("SanitizeName = %q", got)
	}
	if got := SanitizeName("7b"); got != "m7b" {
		t.Errorf("SanitizeName(7b) = %q", got)
	}
}

func names(ts []Tensor) []string {
	var n []string
	for _, t := range ts {
		n = append(n, fmt.Sprintf("%s%v", t.Name, t.Shape))
	}
	return n
}

// TestSurfacesLlama checks the I/O against DESIGN.md's table and AI Hub's
// layout (qnn-genie.md §1.2, §4), written out by hand.
func TestSurfacesLlama(t *testing.T) {
	cfg := llamaConfig()
	p := mustPlan(t, cfg, uniform(32, 100*mib), 500*mib, 500*mib, Options{LayersPerStage: 16, AR: []int{128, 1}, CL: []int{4096}})
	if len(p.Graphs) != 4 || p.RopeDim != 64 {
		t.Fatalf("%d graphs, rope dim %d; want 4, 64", len(p.Graphs), p.RopeDim)
	}
	g := p.Graphs[0]
	if g.Name != "llama_ar128_cl4096_01_of_02" {
		t.Errorf("name %s", g.Name)
	}
	wantIn := []string{"input_ids[1 128]", "attention_mask[1 1 128 4096]", "position_ids_cos[1 1 128 64]", "position_ids_sin[1 1 128 64]",
		"past_key_0_in[8 1 128 3968]", "past_value_0_in[8 1 3968 128]"}
	if got := names(g.Inputs); !slices.Equal(got[:6], wantIn) || len(got) != 4+2*16 {
		t.Errorf("stage 0 inputs %v…, want %v… (%d total)", got[:6], wantIn, 4+2*16)
	}
	wantOut := []string{"hidden_states_0[1 128 4096]", "past_key_0_out[8 1 128 128]", "past_value_0_out[8 1 128 128]"}
	if got := names(g.Outputs); !slices.Equal(got[:3], wantOut) || got[len(got)-1] != "past_value_15_out[8 1 128 128]" {
		t.Errorf("stage 0 outputs %v", got)
	}
	if p.Graph(1, 1, 4096) != &p.Graphs[3] || p.Graph(2, 1, 4096) != nil || p.Graphs[0].Input(AttentionMask) == nil || p.Graphs[0].Output(Logits) != nil {
		t.Errorf("Graph/Input/Output lookups")
	}
	g = p.Graphs[3] // ar1 stage 2
	if g.Name != "llama_ar1_cl4096_02_of_02" || g.Inputs[0].Name != "hidden_states_0" || g.Outputs[0].Name != "logits" {
		t.Errorf("graph 3: %s in %s out %s", g.Name, g.Inputs[0].Name, g.Outputs[0].Name)
	}
	if got := names(g.Outputs)[0]; got != "logits[1 1 128256]" {
		t.Errorf("logits %s", got)
	}
	if got := names(g.Inputs)[4]; got != "past_key_16_in[8 1 128 4095]" {
		t.Errorf("ar1 key in %s", got)
	}
	for _, g := range p.Graphs {
		for _, tt := range append(g.Inputs, g.Outputs...) {
			if tt.Name == "input_ids" && (tt.DType != Int32 || tt.Encoding != "") {
				t.Errorf("input_ids dtype %s encoding %q", tt.DType, tt.Encoding)
			}
		}
	}
	// Absolute positions: position_ids [1,1,AR] int32, no cos/sin.
	p = mustPlan(t, cfg, uniform(32, 100*mib), 500*mib, 500*mib, Options{LayersPerStage: 16, Positional: Absolute})
	if got := names(p.Graphs[0].Inputs)[2]; got != "position_ids[1 1 128]" || p.RopeDim != 0 {
		t.Errorf("absolute: %s, rope dim %d", got, p.RopeDim)
	}
}

func TestSurfacesHybrid(t *testing.T) {
	cfg := qwen35Config()
	p := mustPlan(t, cfg, uniform(24, 20*mib), 400*mib, 400*mib, Options{Stages: 4, AR: []int{32}, CL: []int{1024}})
	if p.RopeDim != 32 {
		t.Errorf("rope dim %d, want 32 (64 rotary dims / 2)", p.RopeDim)
	}
	// Stage 0: layers 0–5, attention at 3; conv_dim = 2·16·128 + 16·128 = 6144.
	g := p.Graphs[0]
	want := []string{"input_ids[1 32]", "attention_mask[1 1 32 1024]", "position_ids_cos[1 1 32 32]", "position_ids_sin[1 1 32 32]",
		"past_conv_0_in[6144 3]", "past_ssm_0_in[16 128 128]", "past_conv_1_in[6144 3]", "past_ssm_1_in[16 128 128]",
		"past_conv_2_in[6144 3]", "past_ssm_2_in[16 128 128]", "past_key_3_in[2 1 256 992]", "past_value_3_in[2 1 992 256]",
		"past_conv_4_in[6144 3]", "past_ssm_4_in[16 128 128]", "past_conv_5_in[6144 3]", "past_ssm_5_in[16 128 128]"}
	if got := names(g.Inputs); !slices.Equal(got, want) {
		t.Errorf("inputs\n got %v\nwant %v", got, want)
	}
	for _, tt := range append(g.Inputs, g.Outputs...) {
		if strings.HasPrefix(tt.Name, "past_ssm") && (tt.DType != Float32 || tt.Encoding != "") {
			t.Errorf("%s: dtype %s encoding %q, want float32 kept", tt.Name, tt.DType, tt.Encoding)
		}
	}
	// Tied: the last stage's head is token_embd again; with 4 stages it is a copy.
	if p.Stages[3].Bytes != 6*20*mib+400*mib || p.Stages[0].Bytes != 6*20*mib+400*mib {
		t.Errorf("stage bytes %d %d", p.Stages[0].Bytes, p.Stages[3].Bytes)
	}
}

func TestSteps(t *testing.T) {
	cfg := llamaConfig()
	tests := []struct {
		name   string
		d      Dialog
		ar, cl []int
		arc    bool
		probe  int
		m      int
		want   []Variant // per variant: AR, CL, mode, mask, n_process, history
	}{
		{"basic", Dialog{Type: Basic}, []int{128, 1}, []int{4096}, false, 0, 1,
			[]Variant{{128, 4096, ModeKV, 0, 1, 0}, {1, 4096, ModeKV, 0, 1, 0}}},
		// GX README: branches [3,2] → 10 nodes × 3 = 30 tokens, on AR-32.
		{"ssd [3,2]", Dialog{Type: SSD, ForecastTokenCount: 4, Branches: []int{3, 2}, ForecastPrefix: 16}, []int{128, 32}, []int{4096}, false, 0, 30,
			[]Variant{{128, 4096, ModeKV, 0, 30, 0}, {32, 4096, ModeKV, 30, 30, 0}}},
		// The observed failure: Found 4 but expected 0 or 23; history 19.
		{"ssd ar-c", Dialog{Type: SSD, ForecastTokenCount: 1, Branches: []int{1}, ForecastPrefix: 16}, []int{32}, []int{32}, true, 3, 4,
			[]Variant{{32, 32, ModeARc, 4, 23, 19}}},
		{"lade", Dialog{Type: LADE, Window: 4, NGram: 3, GCap: 2}, []int{128, 16}, []int{2048}, false, 0, 12,
			[]Variant{{128, 2048, ModeKV, 0, 12, 0}, {16, 2048, ModeKV, 12, 12, 0}}},
		{"spd", Dialog{Type: SPD, DraftLen: 7}, []int{128, 8, 1}, []int{2048}, false, 0, 8,
			[]Variant{{128, 2048, ModeKV, 0, 8, 0}, {8, 2048, ModeKV, 8, 8, 0}, {1, 2048, ModeKV, 0, 8, 0}}},
		{"eaglet", Dialog{Type: Eaglet, DraftLen: 6, NBranches: 8, MaxTargetTokens: 32}, []int{128, 32}, []int{4096}, false, 0, 32,
			[]Variant{{128, 4096, ModeKV, 0, 32, 0}, {32, 4096, ModeKV, 32, 32, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPlan(t, cfg, uniform(32, 10*mib), 0, 0, Options{LayersPerStage: 4, AR: tt.ar, CL: tt.cl, ARc: tt.arc, Dialog: tt.d, ProbePromptTokens: tt.probe})
			if p.Dialog.StepTokens != tt.m {
				t.Errorf("step tokens %d, want %d", p.Dialog.StepTokens, tt.m)
			}
			if !slices.Equal(p.Variants, tt.want) {
				t.Errorf("variants\n got %+v\nwant %+v", p.Variants, tt.want)
			}
		})
	}
}

func TestDefaultVariants(t *testing.T) {
	for _, tt := range []struct {
		ctx    int
		ar, cl []int
	}{
		{8192, []int{128, 1}, []int{4096}},
		{512, []int{128, 1}, []int{512}},
		{128, []int{32, 1}, []int{128}}, // stories260K's GGUF says 128
		{4, []int{1}, []int{4}},
	} {
		cfg := llamaConfig()
		cfg.ContextLength = tt.ctx
		p := mustPlan(t, cfg, uniform(32, mib), 0, 0, Options{})
		var ar, cl []int
		for _, v := range p.Variants {
			if !slices.Contains(ar, v.AR) {
				ar = append(ar, v.AR)
			}
			if !slices.Contains(cl, v.CL) {
				cl = append(cl, v.CL)
			}
		}
		if !slices.Equal(ar, tt.ar) || !slices.Equal(cl, tt.cl) {
			t.Errorf("context %d: AR %v CL %v, want %v %v", tt.ctx, ar, cl, tt.ar, tt.cl)
		}
	}
}

func TestStageWeightType(t *testing.T) {
	cfg := llamaConfig()
	types := make([]gguf.Type, 32)
	for i := range types {
		types[i] = gguf.Q8_0
	}
	types[5] = gguf.Q1_0
	p := mustPlan(t, cfg, uniform(32, 10*mib), 0, 0, Options{LayersPerStage: 4, LayerTypes: types})
	if p.Stages[0].WeightType != "Q8_0" || p.Stages[1].WeightType != "Q1_0" || p.Stages[0].OneBit() || !p.Stages[1].OneBit() {
		t.Errorf("weight types %q %q", p.Stages[0].WeightType, p.Stages[1].WeightType)
	}
}

// Without a choice, a plan uses RoPE positions unless the model scales
// RoPE in a way Genie cannot compute (linear, yarn): then absolute
// positions, whose graphs hold the scaled tables, and the plan passes the
// checker. An explicit choice is kept.
func TestPositionalDefaultFollowsRopeScaling(t *testing.T) {
	for _, tc := range []struct {
		s    model.RopeScaling
		set  Positional
		want Positional
	}{
		{model.RopeScaling{}, "", Rope},
		{model.RopeScaling{Type: model.RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192}, "", Rope},
		{model.RopeScaling{Type: model.RopeLinear, Factor: 2}, "", Absolute},
		{model.RopeScaling{Type: model.RopeYarn, Factor: 4, OrigContext: 2048}, "", Absolute},
		{model.RopeScaling{Type: model.RopeYarn, Factor: 4, OrigContext: 2048}, Rope, Rope},
	} {
		cfg := llamaConfig()
		cfg.RopeScaling = tc.s
		if tc.s.Type == model.RopeLlama3 {
			cfg.RopeFreqFactors = model.Llama3FreqFactors(cfg.RopeTheta, cfg.RopeDim, tc.s)
		}
		p := mustPlan(t, cfg, uniform(32, 100*mib), 500*mib, 500*mib, Options{LayersPerStage: 8, Positional: tc.set})
		if p.Positional != tc.want {
			t.Errorf("%q scaling, positional %q: plan uses %q, want %q", tc.s.Type, tc.set, p.Positional, tc.want)
		}
		if vs := Check(p, CheckEnv{}); (len(vs) == 0) != (tc.set == "") {
			t.Errorf("%q scaling, positional %q: violations %v", tc.s.Type, tc.set, vs)
		}
	}
}
