package sparse_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/sparse"
	"github.com/qnnprep/qnnprep/synth"
)

func synthModel(t testing.TB, arch model.Arch) *model.Model {
	t.Helper()
	m, err := synth.Model(synth.Config(arch, false), 42)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNMExact checks each N:M variant tensor from its data: every group of
// M holds at least M−N zeros and the tensor's sparsity is exactly 1−N/M
// (synthetic weights have no zeros of their own).
func TestNMExact(t *testing.T) {
	m := synthModel(t, model.Qwen35)
	for _, pat := range []string{"1:4", "2:4", "3:4", "2:8", "4:8"} {
		p := mustPattern(t, pat)
		v := apply(t, m, sparse.Options{Pattern: p})
		want := 1 - float64(p.N)/float64(p.M)
		if len(v.Report.Tensors) == 0 {
			t.Fatalf("%s: no tensors", pat)
		}
		for _, tr := range v.Report.Tensors {
			if tr.Sparsity != want {
				t.Errorf("%s %s: reported %v", pat, tr.Name, tr.Sparsity)
			}
			tn := v.Model.Tensor(tr.Name)
			w, _ := tn.Float32()
			for g := 0; g < len(w); g += p.M {
				z := 0
				for _, x := range w[g : g+p.M] {
					if x == 0 {
						z++
					}
				}
				if z != p.M-p.N {
					t.Fatalf("%s %s group %d has %d zeros", pat, tr.Name, g/p.M, z)
				}
			}
		}
		if v.Report.Sparsity != want {
			t.Errorf("%s: total %v", pat, v.Report.Sparsity)
		}
		// The default set: block matrices but the DeltaNet gates and conv.
		for _, tn := range v.Model.Tensors {
			_, listed := findReport(v.Report, tn.Name)
			def := strings.HasPrefix(tn.Name, "blk.") && len(tn.Dims) == 2 &&
				!strings.Contains(tn.Name, "ssm_conv1d") && !strings.Contains(tn.Name, "ssm_alpha") && !strings.Contains(tn.Name, "ssm_beta")
			if listed != def {
				t.Errorf("%s: %s listed=%v, in default set=%v", pat, tn.Name, listed, def)
			}
		}
	}
}

func TestTargets(t *testing.T) {
	m := synthModel(t, model.Llama)
	p := mustPattern(t, "block16")
	tg1, _ := sparse.ParseTarget("blk.*.ffn_*=0.5")
	tg2, _ := sparse.ParseTarget("blk.1.*=0.25")
	v := apply(t, m, sparse.Options{Pattern: p, Targets: []sparse.Target{tg1, tg2}})
	for _, tr := range v.Report.Tensors {
		want := 0.25
		if strings.Contains(tr.Name, "ffn_") {
			want = 0.5
		} else if !strings.HasPrefix(tr.Name, "blk.1.") {
			t.Errorf("%s zeroed without a target", tr.Name)
		}
		// Synthetic shapes are multiples of 16: exact.
		if tr.Sparsity != want || zeros(t, v.Model.Tensor(tr.Name)) != tr.Zeroed {
			t.Errorf("%s: sparsity %v (zeros %d, reported %d), want %v", tr.Name, tr.Sparsity, zeros(t, v.Model.Tensor(tr.Name)), tr.Zeroed, want)
		}
	}
	if len(v.Report.Tensors) != 2*3+4 {
		t.Errorf("%d tensors", len(v.Report.Tensors))
	}
}

func TestApplyErrors(t *testing.T) {
	m := synthModel(t, model.Llama)
	tg := func(s string) []sparse.Target {
		x, err := sparse.ParseTarget(s)
		if err != nil {
			t.Fatal(err)
		}
		return []sparse.Target{x}
	}
	for _, tc := range []struct {
		opt  sparse.Options
		want string
	}{
		{sparse.Options{Pattern: mustPattern(t, "2:4"), Sparsity: 0.6}, "exactly 0.5"},
		{sparse.Options{Pattern: mustPattern(t, "2:4"), Targets: tg("blk.*.ffn_up.weight=0.4")}, "ffn_up.weight: target sparsity 0.4"},
		{sparse.Options{Pattern: mustPattern(t, "2:4"), Targets: tg("nothing.*=0.5")}, "matches no matrix"},
		{sparse.Options{Pattern: mustPattern(t, "2:128"), Targets: tg("blk.0.ffn_down.weight=0.984375")}, "not a multiple of M = 128"},
		{sparse.Options{Pattern: mustPattern(t, "channel"), Sparsity: 0.5, Targets: tg("blk.*=0.5")}, "one model-wide"},
		{sparse.Options{Pattern: mustPattern(t, "channel")}, "needs a sparsity"},
		{sparse.Options{Pattern: mustPattern(t, "neuron"), Sparsity: 1.5}, "want [0, 1)"},
		{sparse.Options{Pattern: mustPattern(t, "2:4"), Method: sparse.Wanda}, "needs activations"},
		{sparse.Options{Pattern: mustPattern(t, "2:4"), Method: sparse.Wanda, Activations: sparse.Activations{"x": {1}}}, "no activations recorded"},
	} {
		_, err := sparse.Apply(m, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opt, err, tc.want)
		}
	}
	// A default-set matrix whose rows do not fit M is left dense with a note.
	v := apply(t, m, sparse.Options{Pattern: mustPattern(t, "2:128")})
	if len(v.Report.Notes) == 0 || !strings.Contains(v.Report.Notes[0], "left dense") {
		t.Errorf("notes %v", v.Report.Notes)
	}
	if _, err := v.Prune(); err == nil {
		t.Error("N:M variant pruned")
	}
}

var testTokens = []int32{1, 17, 300, 5, 99, 42, 7, 250, 11, 3, 480, 64}

// TestPruneMatchesZeroed is the physical-pruning contract: the smaller
// model gives the zeroed dense variant's logits within 1e-5, on llama,
// qwen3 and qwen35 (hybrid, gated attention, q/k norms), for every
// structural pattern.
func TestPruneMatchesZeroed(t *testing.T) {
	for _, arch := range []model.Arch{model.Llama, model.Qwen2, model.Qwen3, model.Qwen3Next, model.Qwen35} {
		m := synthModel(t, arch)
		dense := logits(t, m, testTokens)
		for _, tc := range []struct {
			pat string
			s   float64
		}{{"channel", 0.25}, {"channel", 0.5}, {"head", 0.5}, {"neuron", 0.5}, {"layer", 0.5}} {
			t.Run(fmt.Sprintf("%s/%s-%g", arch, tc.pat, tc.s), func(t *testing.T) {
				v := apply(t, m, sparse.Options{Pattern: mustPattern(t, tc.pat), Sparsity: tc.s})
				pr, err := v.Prune()
				if err != nil {
					t.Fatal(err)
				}
				checkShrunk(t, tc.pat, m.Config, pr.Config, v.Report.StructureSparsity)
				zl := logits(t, v.Model, testTokens)
				pl := logits(t, pr, testTokens)
				if d := relDiff(zl, pl); d > 1e-5 {
					t.Errorf("pruned vs zeroed: max |Δlogit| = %.3g (%.3g of the largest logit)", maxDiff(zl, pl), d)
				} else {
					t.Logf("max |Δlogit| %.3g (%.3g relative)", maxDiff(zl, pl), d)
				}
				// The variant really changes the model (a test that can fail).
				if d := maxDiff(zl, dense); d < 1e-3 {
					t.Errorf("zeroed variant equals the dense model (Δ %.3g)", d)
				}
				if v.Report.Sparsity <= 0 || v.Report.ModelSparsity <= 0 {
					t.Errorf("report sparsity %v / model %v", v.Report.Sparsity, v.Report.ModelSparsity)
				}
			})
		}
	}
}

func checkShrunk(t *testing.T, pat string, a, b model.Config, frac float64) {
	t.Helper()
	switch pat {
	case "channel":
		if want := a.Hidden - int(math.Round(frac*float64(a.Hidden))); b.Hidden != want {
			t.Errorf("hidden %d → %d, want %d", a.Hidden, b.Hidden, want)
		}
		want := float32(float64(a.RMSEps) * float64(a.Hidden) / float64(b.Hidden))
		if a.Hybrid() {
			want = a.RMSEps // the residual stream is scaled instead
		}
		if b.RMSEps != want {
			t.Errorf("eps %g → %g, want %g", a.RMSEps, b.RMSEps, want)
		}
	case "head":
		g := a.Heads / a.KVHeads
		if b.Heads >= a.Heads || b.Heads%b.KVHeads != 0 || b.KVHeads != a.KVHeads || b.Heads/b.KVHeads != g-int(math.Round(frac*float64(g))) {
			t.Errorf("heads %d/%d → %d/%d", a.Heads, a.KVHeads, b.Heads, b.KVHeads)
		}
	case "neuron":
		if b.FFN != a.FFN-int(math.Round(frac*float64(a.FFN))) || b.FFN >= a.FFN {
			t.Errorf("ffn %d → %d", a.FFN, b.FFN)
		}
	case "layer":
		if b.Layers >= a.Layers || len(b.LayerKinds) != b.Layers {
			t.Errorf("layers %d → %d", a.Layers, b.Layers)
		}
	}
}

// TestChannelNormCorrection shows why RMSNorm needs eps·d/d' and
// w·sqrt(d/d'): pruning channels without them changes the logits far
// beyond the 1e-5 the corrected model keeps.
func TestChannelNormCorrection(t *testing.T) {
	m := synthModel(t, model.Llama)
	v := apply(t, m, sparse.Options{Pattern: mustPattern(t, "channel"), Sparsity: 0.5})
	pr, err := v.Prune()
	if err != nil {
		t.Fatal(err)
	}
	// Undo the correction: the source eps and the unscaled norm weights.
	cfg := pr.Config
	cfg.RMSEps = m.Config.RMSEps
	s := float32(math.Sqrt(float64(m.Config.Hidden) / float64(cfg.Hidden)))
	var ts []*model.Tensor
	for _, tn := range pr.Tensors {
		if strings.HasSuffix(tn.Name, "norm.weight") {
			w, err := tn.Float32()
			if err != nil {
				t.Fatal(err)
			}
			for i := range w {
				w[i] /= s
			}
			tn = model.NewTensor(tn.Name, tn.Dims, tn.Type, f32(w))
		}
		ts = append(ts, tn)
	}
	naive, err := model.New(cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	zl, pl, nl := logits(t, v.Model, testTokens), logits(t, pr, testTokens), logits(t, naive, testTokens)
	if d := relDiff(zl, pl); d > 1e-5 {
		t.Errorf("corrected: Δ %.3g", d)
	}
	if d := maxDiff(zl, nl); d < 1e-2 {
		t.Errorf("uncorrected pruning differs by only %.3g", d)
	}
}

// TestStructuralZeros checks, from the data, that the zeroed structures
// are what the report says: whole hidden channels, heads per KV group,
// neurons and layers.
func TestStructuralZeros(t *testing.T) {
	m := synthModel(t, model.Qwen2)
	c := m.Config
	v := apply(t, m, sparse.Options{Pattern: mustPattern(t, "channel"), Sparsity: 0.25})
	ch := v.Removed().Channels
	if len(ch) != c.Hidden/4 {
		t.Fatalf("%d channels", len(ch))
	}
	emb, _ := v.Model.Tensor("token_embd.weight").Float32()
	for r := 0; r < c.VocabSize; r++ {
		for j := 0; j < c.Hidden; j++ {
			if (emb[r*c.Hidden+j] == 0) != slices.Contains(ch, j) {
				t.Fatalf("token_embd[%d][%d] = %v", r, j, emb[r*c.Hidden+j])
			}
		}
	}
	down, _ := v.Model.Tensor("blk.1.ffn_down.weight").Float32()
	for _, r := range ch {
		for j := 0; j < c.FFN; j++ {
			if down[r*c.FFN+j] != 0 {
				t.Fatalf("ffn_down row %d not zero", r)
			}
		}
	}

	v = apply(t, m, sparse.Options{Pattern: mustPattern(t, "head"), Sparsity: 0.5})
	g := c.Heads / c.KVHeads
	for i, hs := range v.Removed().Heads {
		per := make([]int, c.KVHeads)
		for _, h := range hs {
			per[h/g]++
		}
		for kv, n := range per {
			if n != g/2 {
				t.Errorf("layer %d group %d: %d heads removed", i, kv, n)
			}
		}
		b, _ := v.Model.Tensor(fmt.Sprintf("blk.%d.attn_q.bias", i)).Float32()
		for _, h := range hs {
			for j := h * c.HeadDim; j < (h+1)*c.HeadDim; j++ {
				if b[j] != 0 {
					t.Fatalf("layer %d head %d bias not zeroed", i, h)
				}
			}
		}
	}
}

// TestQwen35Heads: gated attention with two query heads per KV group and
// interleaved [q | gate] rows.
func TestQwen35Heads(t *testing.T) {
	m := synthModel(t, model.Qwen35)
	c := m.Config
	v := apply(t, m, sparse.Options{Pattern: mustPattern(t, "head"), Sparsity: 0.9})
	// 0.9 of 2 heads per group rounds to 2: one must stay.
	if v.Report.StructureSparsity != 0.5 {
		t.Errorf("structure sparsity %v", v.Report.StructureSparsity)
	}
	for i, hs := range v.Removed().Heads {
		if c.LayerKinds[i] != model.Attention {
			if hs != nil {
				t.Errorf("DeltaNet layer %d has heads %v", i, hs)
			}
			continue
		}
		q, _ := v.Model.Tensor(fmt.Sprintf("blk.%d.attn_q.weight", i)).Float32()
		h := hs[0]
		rows := 2 * c.HeadDim
		for r := h * rows; r < (h+1)*rows; r++ {
			for j := 0; j < c.Hidden; j++ {
				if q[r*c.Hidden+j] != 0 {
					t.Fatalf("attn_q row %d (head %d q|gate) not zero", r, h)
				}
			}
		}
	}
}

// TestAlign: --align rounds the pruned width down to a multiple, so a
// pruned model keeps rows that Q8_0 (32) can hold.
func TestAlign(t *testing.T) {
	m := synthModel(t, model.Llama) // hidden 64, ffn 96
	for _, tc := range []struct {
		pat         string
		s           float64
		align, want int // pruned width
	}{{"channel", 0.25, 32, 32}, {"channel", 0.1, 16, 48}, {"channel", 0.9, 32, 32}, {"neuron", 0.25, 32, 64}, {"neuron", 0.2, 0, 77}} {
		v := apply(t, m, sparse.Options{Pattern: mustPattern(t, tc.pat), Sparsity: tc.s, Align: tc.align})
		pr, err := v.Prune()
		if err != nil {
			t.Fatal(err)
		}
		got := pr.Config.Hidden
		if tc.pat == "neuron" {
			got = pr.Config.FFN
		}
		if got != tc.want {
			t.Errorf("%s %g align %d: width %d, want %d", tc.pat, tc.s, tc.align, got, tc.want)
		}
	}
	if _, err := sparse.Apply(m, sparse.Options{Pattern: mustPattern(t, "head"), Sparsity: 0.5, Align: 32}); err == nil {
		t.Error("align accepted for heads")
	}
	if _, err := sparse.Apply(m, sparse.Options{Pattern: mustPattern(t, "channel"), Sparsity: 0.5, Align: 128}); err == nil {
		t.Error("hidden 64 aligned to 128")
	}
}

// Structural patterns remove whole structures: the requested fraction is
// hit exactly, or the report says what it rounded to and why, and a
// fraction that rounds to nothing is an error.
func TestStructureRounding(t *testing.T) {
	m := synthModel(t, model.Llama) // 4 heads in 2 KV groups, hidden 64, ffn 96, 2 layers
	for _, c := range []struct {
		pat   string
		s     float64
		align int
		got   float64 // structure sparsity removed
		note  string  // "" for none
		err   string
	}{
		{pat: "head", s: 0.5, got: 0.5},
		{pat: "head", s: 0.25, got: 0.5, note: "sparsity 0.25 of 2 query heads per KV group is 0.5; removed 1 (0.5000): the same number of query heads goes from each of the 2 KV groups"},
		{pat: "head", s: 0.1, err: "sparsity 0.1 of 2 query heads per KV group rounds to 0: nothing would be removed (the smallest step is 1/2 = 0.5)"},
		{pat: "channel", s: 0.25, got: 0.25},
		{pat: "channel", s: 0.3, got: 19.0 / 64, note: "sparsity 0.3 of 64 hidden channels is 19.2; removed 19 (0.2969): whole channels only"},
		{pat: "channel", s: 0.3, align: 32, got: 0.5, note: "removed 32 (0.5000): whole channels only, and the kept hidden width rounded down to a multiple of --align 32"},
		{pat: "channel", s: 0.005, err: "sparsity 0.005 of 64 hidden channels rounds to 0"},
		{pat: "neuron", s: 0.25, got: 0.25},
		{pat: "neuron", s: 0.2, got: 19.0 / 96, note: "sparsity 0.2 of 96 ffn units is 19.2; removed 19 (0.1979): whole units only"},
		{pat: "layer", s: 0.25, got: 0.5, note: "sparsity 0.25 of 2 layers is 0.5; removed 1 (0.5000): only whole layers"},
	} {
		t.Run(fmt.Sprintf("%s %g align %d", c.pat, c.s, c.align), func(t *testing.T) {
			v, err := sparse.Apply(m, sparse.Options{Pattern: mustPattern(t, c.pat), Sparsity: c.s, Align: c.align})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(v.Report.StructureSparsity-c.got) > 1e-12 {
				t.Errorf("removed %v, want %v", v.Report.StructureSparsity, c.got)
			}
			notes := strings.Join(v.Report.Notes, "\n")
			if c.note == "" && notes != "" || !strings.Contains(notes, c.note) {
				t.Errorf("notes %q, want %q", notes, c.note)
			}
		})
	}
}
