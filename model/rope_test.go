package model

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
)

func f32p(v float32) *float32 { return &v }

func hfRopeConfig(t *testing.T, arch string, extra map[string]any) []byte {
	t.Helper()
	c := map[string]any{
		"model_type": arch, "vocab_size": 32, "hidden_size": 64, "intermediate_size": 96,
		"num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
		"max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
	}
	maps.Copy(c, extra)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// config.json's rope_scaling and rope_parameters give the parameters
// llama.cpp's converter reads from them; what llama.cpp would not apply
// as written is an error naming the key.
func TestHFRopeScaling(t *testing.T) {
	yarnMs := float32(0.1*math.Log(4) + 1)
	for _, tc := range []struct {
		name, arch string
		extra      map[string]any
		want       RopeScaling
		err        string
	}{
		{"none", "qwen3", nil, RopeScaling{}, ""},
		{"default", "qwen3", map[string]any{"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e6}}, RopeScaling{}, ""},
		{"linear", "llama", map[string]any{"rope_scaling": map[string]any{"type": "linear", "factor": 2}},
			RopeScaling{Type: RopeLinear, Factor: 2}, ""},
		{"yarn rope_parameters", "qwen3", map[string]any{"rope_parameters": map[string]any{"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 1024, "rope_theta": 1e6}},
			RopeScaling{Type: RopeYarn, Factor: 4, OrigContext: 1024}, ""},
		{"yarn top-level original context", "qwen3", map[string]any{"original_max_position_embeddings": 512, "rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4}},
			RopeScaling{Type: RopeYarn, Factor: 4, OrigContext: 512}, ""},
		{"yarn without original context", "qwen3", map[string]any{"rope_scaling": map[string]any{"type": "yarn", "factor": 4}},
			RopeScaling{Type: RopeYarn, Factor: 4, OrigContext: 4096}, ""},
		{"yarn explicit defaults", "llama", map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 1024,
			"beta_fast": 32, "beta_slow": 1, "extrapolation_factor": 1, "attention_factor": float64(yarnMs)}},
			RopeScaling{Type: RopeYarn, Factor: 4, OrigContext: 1024, YarnExtFactor: f32p(1), YarnAttnFactor: f32p(yarnMs), YarnBetaFast: f32p(32), YarnBetaSlow: f32p(1)}, ""},
		{"llama3", "llama", map[string]any{"rope_scaling": map[string]any{"rope_type": "llama3", "factor": 32, "original_max_position_embeddings": 8192}},
			RopeScaling{Type: RopeLlama3, Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192}, ""},
		{"dynamic", "llama", map[string]any{"rope_scaling": map[string]any{"type": "dynamic", "factor": 2}}, RopeScaling{}, `unsupported rope scaling type "dynamic"`},
		{"longrope", "llama", map[string]any{"rope_scaling": map[string]any{"rope_type": "longrope", "factor": 2}}, RopeScaling{}, `unsupported rope scaling type "longrope"`},
		{"linear without factor", "llama", map[string]any{"rope_scaling": map[string]any{"rope_type": "linear"}}, RopeScaling{}, "without a factor"},
		{"yarn mscale_all_dim", "qwen3", map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4, "mscale_all_dim": 1}}, RopeScaling{}, "mscale_all_dim"},
		{"yarn truncate", "qwen3", map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4, "truncate": false}}, RopeScaling{}, "truncate"},
		{"yarn attention_factor", "qwen3", map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4, "attention_factor": 0.5}}, RopeScaling{}, "yarn_attn_factor = 0.5"},
		{"yarn beta_slow", "llama", map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4, "beta_slow": 2}}, RopeScaling{}, "yarn_beta_slow = 2"},
		{"llama3 on qwen2", "qwen2", map[string]any{"rope_scaling": map[string]any{"rope_type": "llama3", "factor": 8}}, RopeScaling{}, "llama3 on qwen2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseHFConfig(hfRopeConfig(t, tc.arch, tc.extra))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalScaling(c.RopeScaling, tc.want) {
				t.Errorf("got %+v, want %+v", c.RopeScaling, tc.want)
			}
			if got := len(c.RopeFreqFactors) > 0; got != (tc.want.Type == RopeLlama3) {
				t.Errorf("rope frequency factors present = %v for %q", got, tc.want.Type)
			}
		})
	}
}

func equalScaling(a, b RopeScaling) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// The GGUF keys are the ones llama.cpp's converter writes for each type,
// and reading them back gives the same parameters. Keys llama.cpp reads
// in its own way (no type means linear, "none" drops the factor) are read
// the same way.
func TestGGUFRopeScalingKeys(t *testing.T) {
	const p = "qwen3."
	for _, tc := range []struct {
		s    RopeScaling
		keys []string
	}{
		{RopeScaling{}, nil},
		{RopeScaling{Type: RopeLinear, Factor: 2}, []string{"rope.scaling.factor", "rope.scaling.type"}},
		{RopeScaling{Type: RopeYarn, Factor: 4, OrigContext: 1024}, []string{"rope.scaling.factor", "rope.scaling.original_context_length", "rope.scaling.type"}},
		{RopeScaling{Type: RopeYarn, Factor: 4, OrigContext: 1024, YarnBetaFast: f32p(32), YarnBetaSlow: f32p(1)},
			[]string{"rope.scaling.factor", "rope.scaling.original_context_length", "rope.scaling.type", "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow"}},
		// llama3 is the rope_freqs.weight tensor, with no key.
		{RopeScaling{Type: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192}, nil},
	} {
		t.Run(string(tc.s.Type), func(t *testing.T) {
			var md gguf.Metadata
			setRopeScaling(&md, p, tc.s)
			var keys []string
			for _, kv := range md {
				keys = append(keys, strings.TrimPrefix(kv.Key, p))
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tc.keys) {
				t.Errorf("keys %v, want %v", keys, tc.keys)
			}
			r := &mdReader{md: md}
			got := r.ropeScaling(p)
			want := tc.s
			if want.Type == RopeLlama3 {
				want = RopeScaling{}
			}
			if len(r.errs) > 0 || !equalScaling(got, want) {
				t.Errorf("read back %+v (%v), want %+v", got, r.errs, want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		set  map[string]any
		want RopeScaling
		err  string
	}{
		{"factor without type", map[string]any{"rope.scaling.factor": float32(2)}, RopeScaling{Type: RopeLinear, Factor: 2}, ""},
		{"old scale_linear key", map[string]any{"rope.scale_linear": float32(3)}, RopeScaling{Type: RopeLinear, Factor: 3}, ""},
		{"none drops the factor", map[string]any{"rope.scaling.type": "none", "rope.scaling.factor": float32(2)}, RopeScaling{}, ""},
		{"longrope", map[string]any{"rope.scaling.type": "longrope"}, RopeScaling{}, `"longrope": unsupported rope scaling type`},
		{"unknown", map[string]any{"rope.scaling.type": "ntk"}, RopeScaling{}, `"ntk": unsupported rope scaling type`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var md gguf.Metadata
			for _, k := range slices.Sorted(maps.Keys(tc.set)) {
				md.Set(p+k, tc.set[k])
			}
			r := &mdReader{md: md}
			got := r.ropeScaling(p)
			if tc.err != "" {
				if len(r.errs) == 0 || !strings.Contains(r.errs[0], tc.err) {
					t.Fatalf("errors %v, want %q", r.errs, tc.err)
				}
				return
			}
			if len(r.errs) > 0 || !equalScaling(got, tc.want) {
				t.Errorf("got %+v (%v), want %+v", got, r.errs, tc.want)
			}
		})
	}
}

// The Llama 3 parameters Genie needs come back from the rope_freqs
// factors of Llama 3.1- and 3.2-style configs.
func TestRecoverLlama3(t *testing.T) {
	for _, s := range []RopeScaling{
		{Type: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192},
		{Type: RopeLlama3, Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192},
		{Type: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 64},
	} {
		for _, dim := range []int{128, 64} {
			ff := Llama3FreqFactors(500000, dim, s)
			if got := recoverLlama3(ff, 500000, dim); !equalScaling(got, s) {
				t.Errorf("dim %d: recovered %+v, want %+v", dim, got, s)
			}
		}
	}
	if got := recoverLlama3([]float32{1, 1, 3, 1}, 500000, 8); got.OrigContext != 0 {
		t.Errorf("factors no llama3 parameters give: recovered %+v", got)
	}
}

// Rope's tables equal transformers' rotary embeddings for each scaling,
// computed here independently in float64 from inv_freq:
// linear inv_freq/factor; llama3 inv_freq/rope_freqs; yarn
// (_compute_yarn_parameters) inv_freq/factor·(1−e) + inv_freq·e with e
// = 1 − ramp over the correction band, cos and sin times
// 0.1·ln(factor) + 1.
func TestRopeMatchesTransformers(t *testing.T) {
	const theta, dim, orig = 10000.0, 64, 64
	for _, s := range []RopeScaling{
		{},
		{Type: RopeLinear, Factor: 4},
		{Type: RopeYarn, Factor: 4, OrigContext: orig},
		{Type: RopeYarn, Factor: 16, OrigContext: 2 * orig},
		{Type: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: orig},
	} {
		t.Run(string(s.Type), func(t *testing.T) {
			c := Config{RopeTheta: theta, RopeDim: dim, ContextLength: 1024, RopeScaling: s}
			if s.Type == RopeLlama3 {
				c.RopeFreqFactors = Llama3FreqFactors(theta, dim, s)
			}
			r, err := c.Rope()
			if err != nil {
				t.Fatal(err)
			}
			inv := make([]float64, dim/2)
			mag := 1.0
			corr := func(b float64) float64 {
				return dim * math.Log(float64(s.OrigContext)/(b*2*math.Pi)) / (2 * math.Log(theta))
			}
			lo, hi := math.Max(0, math.Floor(corr(32))), math.Min(dim-1, math.Ceil(corr(1)))
			if lo == hi {
				hi += 0.001
			}
			for i := range inv {
				base := 1 / math.Pow(theta, float64(2*i)/dim)
				switch s.Type {
				case RopeNoScaling:
					inv[i] = base
				case RopeLinear:
					inv[i] = base / float64(s.Factor)
				case RopeLlama3:
					inv[i] = base / float64(c.RopeFreqFactors[i])
				case RopeYarn:
					ramp := math.Min(1, math.Max(0, (float64(i)-lo)/(hi-lo)))
					e := 1 - ramp
					inv[i] = base/float64(s.Factor)*(1-e) + base*e
					mag = 0.1*math.Log(float64(s.Factor)) + 1
				}
			}
			cos, sin := make([]float32, dim/2), make([]float32, dim/2)
			var worst float64
			for p := int32(0); p < 300; p += 7 {
				r.Table(p, cos, sin)
				for i := range inv {
					a := float64(p) * inv[i]
					worst = max(worst, math.Abs(float64(cos[i])-mag*math.Cos(a)), math.Abs(float64(sin[i])-mag*math.Sin(a)))
				}
			}
			if worst > 2e-4 {
				t.Errorf("tables differ from transformers' by up to %g", worst)
			}
			if got := float64(r.Magnitude()); math.Abs(got-mag) > 1e-6 {
				t.Errorf("magnitude %v, want %v", got, mag)
			}
		})
	}
}
