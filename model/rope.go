package model

import (
	"fmt"
	"math"
)

// RopeScalingType names a RoPE context-extension scheme, as transformers'
// rope_type does.
type RopeScalingType string

const (
	// RopeNoScaling is plain RoPE.
	RopeNoScaling RopeScalingType = ""
	// RopeLinear divides every rotation angle by Factor.
	RopeLinear RopeScalingType = "linear"
	// RopeYarn is YaRN: angles interpolated by Factor below the
	// correction band, kept above it, blended across it, and cos and sin
	// scaled by an attention factor.
	RopeYarn RopeScalingType = "yarn"
	// RopeLlama3 is Llama 3's per-frequency scaling; the per-pair
	// divisors are Config.RopeFreqFactors (GGUF rope_freqs.weight).
	RopeLlama3 RopeScalingType = "llama3"
)

// The defaults llama.cpp uses for YaRN on llama, qwen2 and qwen3; it
// does not read the GGUF yarn_* keys for these architectures.
const (
	YarnBetaFast  = 32
	YarnBetaSlow  = 1
	YarnExtFactor = 1
)

// RopeScaling holds a model's RoPE scaling parameters as its files state
// them: config.json's rope_scaling (or rope_parameters) and the GGUF
// {arch}.rope.scaling.* keys. Optional yarn values are nil when the file
// does not give them, so a converted file carries exactly the keys
// llama.cpp's converter writes.
type RopeScaling struct {
	Type RopeScalingType `json:"type,omitempty"`
	// Factor is the context-extension factor (linear, yarn, llama3).
	Factor float32 `json:"factor,omitempty"`
	// OrigContext is the training context before extension
	// (original_max_position_embeddings, GGUF
	// rope.scaling.original_context_length); 0 means ContextLength.
	OrigContext int `json:"original_context,omitempty"`
	// LowFreqFactor and HighFreqFactor are Llama 3's band edges.
	LowFreqFactor  float32 `json:"low_freq_factor,omitempty"`
	HighFreqFactor float32 `json:"high_freq_factor,omitempty"`
	// AttnFactor is GGUF rope.scaling.attn_factor, which llama.cpp
	// multiplies into the RoPE magnitude of every type; 0 means 1.
	AttnFactor float32 `json:"attn_factor,omitempty"`
	// YaRN's optional values: extrapolation_factor, attention_factor,
	// beta_fast and beta_slow (GGUF rope.scaling.yarn_*).
	YarnExtFactor  *float32 `json:"yarn_ext_factor,omitempty"`
	YarnAttnFactor *float32 `json:"yarn_attn_factor,omitempty"`
	YarnBetaFast   *float32 `json:"yarn_beta_fast,omitempty"`
	YarnBetaSlow   *float32 `json:"yarn_beta_slow,omitempty"`
}

// validate reports what llama.cpp would not apply as stated: an unknown
// type, a missing factor, and yarn values llama.cpp replaces by its own
// (it reads no yarn_* key for these architectures), which would make the
// decode differ from llama.cpp's.
func (s *RopeScaling) validate(c *Config, bad func(format string, a ...any)) {
	switch s.Type {
	case RopeNoScaling:
		if s.Factor != 0 || s.OrigContext != 0 || s.LowFreqFactor != 0 || s.HighFreqFactor != 0 ||
			s.YarnExtFactor != nil || s.YarnAttnFactor != nil || s.YarnBetaFast != nil || s.YarnBetaSlow != nil {
			bad("rope scaling parameters without a rope scaling type")
		}
	case RopeLinear, RopeYarn, RopeLlama3:
	default:
		bad("unknown rope scaling type %q (want linear, yarn or llama3)", s.Type)
		return
	}
	if s.Type != RopeNoScaling && (!(s.Factor > 0) || math.IsInf(float64(s.Factor), 0)) {
		bad("rope scaling %s: factor = %v, want > 0", s.Type, s.Factor)
	}
	if s.OrigContext < 0 || s.OrigContext > maxContext {
		bad("rope scaling original context = %d, want 0..%d", s.OrigContext, maxContext)
	}
	if !(s.AttnFactor >= 0) || math.IsInf(float64(s.AttnFactor), 0) {
		bad("rope scaling attn_factor = %v, want ≥ 0", s.AttnFactor)
	}
	if s.Type != RopeYarn && (s.YarnExtFactor != nil || s.YarnAttnFactor != nil || s.YarnBetaFast != nil || s.YarnBetaSlow != nil) {
		bad("yarn parameters with rope scaling type %q", s.Type)
	}
	if s.Type != RopeLlama3 && (s.LowFreqFactor != 0 || s.HighFreqFactor != 0) {
		bad("llama3 frequency factors with rope scaling type %q", s.Type)
	}
	switch s.Type {
	case RopeLlama3:
		if !c.Arch.Features().RopeFreqs {
			bad("rope scaling llama3 on %s: llama.cpp applies rope_freqs.weight only for llama", c.Arch)
		}
		if len(c.RopeFreqFactors) == 0 {
			bad("rope scaling llama3 without rope frequency factors (rope_freqs.weight)")
		}
		if s.LowFreqFactor != 0 || s.HighFreqFactor != 0 {
			if !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) {
				bad("rope scaling llama3: low_freq_factor %v, high_freq_factor %v, want 0 < low < high", s.LowFreqFactor, s.HighFreqFactor)
			}
		}
	case RopeYarn:
		fixed := []struct {
			key string
			v   *float32
			def float32
		}{
			{"yarn_ext_factor", s.YarnExtFactor, YarnExtFactor},
			{"yarn_beta_fast", s.YarnBetaFast, YarnBetaFast},
			{"yarn_beta_slow", s.YarnBetaSlow, YarnBetaSlow},
			{"yarn_attn_factor", s.YarnAttnFactor, yarnMscale(s.Factor)},
		}
		for _, f := range fixed {
			if f.v != nil && !closeTo(*f.v, f.def) {
				bad("rope scaling yarn: %s = %v, but llama.cpp uses %v for %s (it does not read the key); not supported", f.key, *f.v, f.def, c.Arch)
			}
		}
	}
	if s.Type != RopeLlama3 && len(c.RopeFreqFactors) > 0 {
		bad("rope frequency factors (rope_freqs.weight) with rope scaling type %q; llama.cpp writes them only for llama3", s.Type)
	}
}

// yarnMscale is YaRN's magnitude for a factor: 1 + 0.1·ln(factor) above 1
// (transformers' attention_factor default, and what llama.cpp applies).
func yarnMscale(factor float32) float32 {
	if factor <= 1 {
		return 1
	}
	return 0.1*logf(factor) + 1
}

func closeTo(a, b float32) bool {
	return math.Abs(float64(a)-float64(b)) <= 1e-6*math.Max(1, math.Abs(float64(b)))
}

func logf(x float32) float32 { return float32(math.Log(float64(x))) }

// Rope computes a model's RoPE rotation tables as ggml's CPU rope cache
// does (ggml_rope_cache_init and rope_yarn), all in float32, so that the
// runtime, the plan's position_ids_cos/_sin inputs and the exported graphs
// rotate by the same bits llama.cpp does.
type Rope struct {
	pairs      int
	thetaScale float32   // base^(−2/n_rot)
	factors    []float32 // llama3 per-pair divisors, or nil
	freqScale  float32   // 1/factor for linear and yarn, else 1
	ext        float32   // yarn extrapolation mix, 0 otherwise
	corr       [2]float32
	mscale     float32 // cos and sin magnitude
}

// Rope returns c's rotation tables. Call it on a validated Config.
func (c *Config) Rope() (*Rope, error) {
	if c.RopeDim <= 0 || c.RopeDim%2 != 0 {
		return nil, fmt.Errorf("model: rope_dim %d, want a positive even number", c.RopeDim)
	}
	if n := len(c.RopeFreqFactors); n != 0 && n != c.RopeDim/2 {
		return nil, fmt.Errorf("model: %d rope frequency factors, want rope_dim/2 = %d", n, c.RopeDim/2)
	}
	s := c.RopeScaling
	r := &Rope{
		pairs:      c.RopeDim / 2,
		thetaScale: float32(math.Pow(float64(float32(c.RopeTheta)), float64(float32(-2)/float32(c.RopeDim)))),
		factors:    c.RopeFreqFactors,
		freqScale:  1,
		mscale:     1,
	}
	// llama.cpp's context parameters: freq_scale = 1/factor for linear
	// and yarn (llama3 files carry no rope.scaling.factor key).
	if s.Type == RopeLinear || s.Type == RopeYarn {
		r.freqScale = 1 / s.Factor
	}
	attn := float32(1)
	if s.Type == RopeYarn {
		r.ext = YarnExtFactor
		factor := 1 / r.freqScale
		// llama.cpp sets yarn_attn_factor = mscale(factor)/(1+0.1·ln factor),
		// and rope_yarn multiplies by 1+0.1·ln(1/freq_scale) again.
		attn = yarnMscale(factor) * (1 / (1 + 0.1*logf(factor)))
		orig := s.OrigContext
		if orig == 0 {
			orig = c.ContextLength
		}
		r.corr = yarnCorrDims(c.RopeDim, orig, float32(c.RopeTheta), YarnBetaFast, YarnBetaSlow)
	}
	if s.AttnFactor != 0 {
		attn *= s.AttnFactor
	}
	r.mscale = attn
	if r.ext != 0 {
		r.mscale *= 1 + 0.1*logf(1/r.freqScale)
	}
	return r, nil
}

// yarnCorrDims is ggml_rope_yarn_corr_dims: the pair band [lo, hi] over
// which YaRN blends interpolated and original angles, where pair d
// completes b rotations over the original context at d(b) =
// n·ln(ctx/(2π·b)) / (2·ln base).
func yarnCorrDims(nDims, origCtx int, base, betaFast, betaSlow float32) [2]float32 {
	dim := func(b float32) float32 {
		return float32(nDims) * logf(float32(origCtx)/(b*2*float32(math.Pi))) / (2 * logf(base))
	}
	lo := float32(math.Floor(float64(dim(betaFast))))
	hi := float32(math.Ceil(float64(dim(betaSlow))))
	return [2]float32{max(0, lo), min(float32(nDims-1), hi)}
}

// Pairs is the number of rotated pairs (rope_dim / 2).
func (r *Rope) Pairs() int { return r.pairs }

// Magnitude is the length of each (cos, sin) pair: 1 except for YaRN
// and a rope.scaling.attn_factor.
func (r *Rope) Magnitude() float32 { return r.mscale }

// ramp is YaRN's extrapolation weight of pair i (rope_yarn_ramp).
func (r *Rope) ramp(i int) float32 {
	y := (float32(i) - r.corr[0]) / max(0.001, r.corr[1]-r.corr[0])
	return 1 - min(1, max(0, y))
}

// angle turns pair i's unscaled angle into the scaled one.
func (r *Rope) angle(theta float32, i int) float32 {
	if r.factors != nil {
		theta /= r.factors[i]
	}
	interp := r.freqScale * theta
	if r.ext == 0 {
		return interp
	}
	mix := r.ramp(i) * r.ext
	return interp*(1-mix) + theta*mix
}

// Table fills cos and sin (len Pairs) for position p: theta starts at p
// and is multiplied by base^(−2/n_rot) once per pair, then scaled.
func (r *Rope) Table(p int32, cos, sin []float32) {
	theta := float32(p)
	for i := range cos[:r.pairs] {
		t := r.angle(theta, i)
		cos[i] = float32(math.Cos(float64(t))) * r.mscale
		sin[i] = float32(math.Sin(float64(t))) * r.mscale
		theta *= r.thetaScale
	}
}

// Rate is pair i's angle per position, in float64 (for recovering a
// position from a table row).
func (r *Rope) Rate(i int) float64 {
	f := 1.0
	for range i {
		f *= float64(r.thetaScale)
	}
	if r.factors != nil {
		f /= float64(r.factors[i])
	}
	mix := 0.0
	if r.ext != 0 {
		mix = float64(r.ramp(i) * r.ext)
	}
	return f * (float64(r.freqScale)*(1-mix) + mix)
}

// Llama3FreqFactors returns the rope_freqs.weight values llama.cpp's
// converter computes from Llama 3 parameters s: pair i with wavelength
// 2π/freq_i keeps its frequency below OrigContext/HighFreqFactor, is
// divided by Factor above OrigContext/LowFreqFactor, and is blended
// between. The frequencies are float32, as the converter's torch tensor.
func Llama3FreqFactors(theta float64, ropeDim int, s RopeScaling) []float32 {
	factor, lowFF, highFF := float64(s.Factor), float64(s.LowFreqFactor), float64(s.HighFreqFactor)
	oldCtx := float64(s.OrigContext)
	lowWL, highWL := oldCtx/lowFF, oldCtx/highFF
	out := make([]float32, ropeDim/2)
	for i := range out {
		freq := float32(1 / float32(math.Pow(theta, float64(float32(2*i)/float32(ropeDim)))))
		wl := 2 * math.Pi / float64(freq)
		switch {
		case wl < highWL:
			out[i] = 1
		case wl > lowWL:
			out[i] = float32(factor)
		default:
			sm := (oldCtx/wl - lowFF) / (highFF - lowFF)
			out[i] = float32(1 / ((1-sm)/factor + sm))
		}
	}
	return out
}

// recoverLlama3 finds Llama 3 parameters that give the factors ff, for a
// GGUF file that holds only rope_freqs.weight. With two or more blended
// pairs the band is solved for: s = a/wavelength − b with a =
// old_ctx/(high−low) and b = low/(high−low), taking low = 1; otherwise
// the usual Llama 3 values are tried. The parameters are kept only if
// they give ff again; else only Factor is known.
func recoverLlama3(ff []float32, theta float64, ropeDim int) RopeScaling {
	s := RopeScaling{Type: RopeLlama3}
	for _, f := range ff {
		s.Factor = max(s.Factor, f)
	}
	if !(s.Factor > 1) || len(ff) != ropeDim/2 {
		return s
	}
	same := func(c RopeScaling) bool {
		got := Llama3FreqFactors(theta, ropeDim, c)
		for i := range got {
			if !closeToRel(got[i], ff[i], 1e-5) {
				return false
			}
		}
		return true
	}
	wl := func(i int) float64 {
		return 2 * math.Pi * math.Pow(theta, float64(2*i)/float64(ropeDim))
	}
	var blend []int
	for i, f := range ff {
		if !closeToRel(f, 1, 1e-6) && !closeToRel(f, s.Factor, 1e-6) {
			blend = append(blend, i)
		}
	}
	var cands []RopeScaling
	if len(blend) >= 2 {
		i, j := blend[0], blend[len(blend)-1]
		sm := func(k int) float64 {
			inv := 1 / float64(s.Factor)
			return (1/float64(ff[k]) - inv) / (1 - inv)
		}
		a := (sm(i) - sm(j)) / (1/wl(i) - 1/wl(j))
		b := a/wl(i) - sm(i)
		if a > 0 && b > 0 {
			c := s
			c.OrigContext = int(math.Round(a / b))
			c.LowFreqFactor = 1
			c.HighFreqFactor = float32(math.Round((1+b)/b*1e4) / 1e4)
			cands = append(cands, c)
		}
	}
	for _, ctx := range []int{8192, 4096, 2048, 16384, 32768, 65536, 131072, 1024, 512, 256, 128, 64} {
		for _, hf := range []float32{4, 2, 8} {
			cands = append(cands, RopeScaling{Type: RopeLlama3, Factor: s.Factor, OrigContext: ctx, LowFreqFactor: 1, HighFreqFactor: hf})
		}
	}
	for _, c := range cands {
		if c.OrigContext > 0 && same(c) {
			return c
		}
	}
	return s
}

func closeToRel(a, b float32, tol float64) bool {
	return math.Abs(float64(a)-float64(b)) <= tol*math.Max(1, math.Abs(float64(b)))
}
