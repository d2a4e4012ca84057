package shard

import (
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

func rules(vs []Violation) []string {
	var r []string
	for _, v := range vs {
		if !slices.Contains(r, v.Rule) {
			r = append(r, v.Rule)
		}
	}
	return r
}

// TestCheckRegressionSSDArc reproduces the observed failure (qnn-genie.md
// §0): 32 layers in 8 stages of 4, ssd-q1 with one branch, CL == AR, a
// 16-entry forecast prefix and a 3-token prompt. Genie said "Invalid
// selection mask size. Found 4 but expected 0 or 23" and "Missing token
// history. Expected 19".
func TestCheckRegressionSSDArc(t *testing.T) {
	d := Dialog{Type: SSD, ForecastTokenCount: 1, Branches: []int{1}, ForecastPrefix: 16, ForecastPrefixName: "forecast-prefix"}
	p := mustPlan(t, llamaConfig(), uniform(32, 100*mib), 500*mib, 500*mib,
		Options{LayersPerStage: 4, AR: []int{32}, CL: []int{32}, ARc: true, Dialog: d})
	vs := Check(p, CheckEnv{ProbePromptTokens: 3})
	if got := rules(vs); !slices.Equal(got, []string{RuleARcMask}) {
		t.Fatalf("rules %v, want only %s: %v", got, RuleARcMask, vs)
	}
	v := vs[0]
	for _, want := range []string{"Found 4 but expected 0 or 23", "Missing token history. Expected 19, Found 3",
		"n_process = m + history = 4 + 19 = 23", "16 forecast-prefix + 3 prompt tokens"} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("message lacks %q:\n%s", want, v.Message)
		}
	}
	if v.Graph != "llama_ar32_cl32_01_of_08" || !strings.Contains(v.Fix, "CL > AR") {
		t.Errorf("graph %q fix %q", v.Graph, v.Fix)
	}
	// The same dialog on KV graphs (CL > AR) is consistent.
	p = mustPlan(t, llamaConfig(), uniform(32, 100*mib), 500*mib, 500*mib,
		Options{LayersPerStage: 4, AR: []int{32}, CL: []int{4096}, Dialog: d})
	if vs := Check(p, CheckEnv{ProbePromptTokens: 3}); len(vs) != 0 {
		t.Errorf("KV graphs: %v", vs)
	}
	// AR-c with a basic dialog passes no mask: allowed.
	p = mustPlan(t, llamaConfig(), uniform(32, 100*mib), 500*mib, 500*mib,
		Options{LayersPerStage: 4, AR: []int{32}, CL: []int{32}, ARc: true})
	if vs := Check(p, CheckEnv{}); len(vs) != 0 {
		t.Errorf("AR-c basic: %v", vs)
	}
}

// basePlan is a consistent 8-stage llama plan.
func basePlan(t *testing.T, mod func(*model.Config, *Options)) *Plan {
	t.Helper()
	cfg := llamaConfig()
	o := Options{LayersPerStage: 4, AR: []int{128, 1}, CL: []int{4096}}
	if mod != nil {
		mod(&cfg, &o)
	}
	return mustPlan(t, cfg, uniform(cfg.Layers, 100*mib), 500*mib, 500*mib, o)
}

func dropInput(p *Plan, graph int, name string) {
	g := &p.Graphs[graph]
	g.Inputs = slices.DeleteFunc(g.Inputs, func(t Tensor) bool { return t.Name == name })
}

func tensorIn(ts []Tensor, name string) *Tensor { return find(ts, name) }

func TestCheckRules(t *testing.T) {
	ssd := Dialog{Type: SSD, ForecastTokenCount: 4, Branches: []int{3, 2}, ForecastPrefix: 16, ForecastPrefixName: "p"}
	tests := []struct {
		rule string
		// pass and fail build a plan that follows and breaks the rule.
		pass, fail func(t *testing.T) *Plan
		env        CheckEnv
		msg        string // part of the failing message
	}{
		{RuleMissingInput,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan { p := basePlan(t, nil); dropInput(p, 2, PositionIDsSin); return p },
			CheckEnv{}, `Tensor not found: position_ids_sin`},
		{RuleMissingInput,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan {
				p := basePlan(t, nil)
				for i := range p.Graphs { // every graph keeps CL in its name, so only the mask is missing
					if p.Graphs[i].AR == 1 {
						dropInput(p, i, AttentionMask)
					}
				}
				return p
			},
			CheckEnv{}, `no graph of variant AR 1, CL 4096 takes attention_mask`},
		{RuleDetect,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan {
				// No attention_mask and the name hides CL: Genie takes CL from
				// the KV pair instead (127 + 1 = 128 ≠ 4096).
				p := basePlan(t, nil)
				g := &p.Graphs[9]
				dropInput(p, 9, AttentionMask)
				tensorIn(g.Inputs, "past_key_4_in").Shape[3] = 127
				return p
			},
			CheckEnv{}, "Genie detects AR 1, CL 128"},
		{RuleShape,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan {
				p := basePlan(t, nil)
				s := tensorIn(p.Graphs[1].Inputs, "past_value_4_in").Shape
				s[2], s[3] = s[3], s[2] // keys' layout on a value
				return p
			},
			CheckEnv{}, "positions, kv-dim"},
		{RuleEncoding,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan {
				p := basePlan(t, nil)
				tensorIn(p.Graphs[3].Outputs, "past_key_13_out").Encoding = "past_key_13_out"
				return p
			},
			CheckEnv{}, "Non-identical quantization parameters"},
		{RuleEncoding,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan {
				p := basePlan(t, nil)
				tensorIn(p.Graphs[0].Inputs, PositionIDsSin).Encoding = PositionIDsSin
				return p
			},
			CheckEnv{}, `differs from "position_ids_cos"`},
		{RuleLink,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan {
				p := basePlan(t, nil)
				tensorIn(p.Graphs[4].Inputs, "hidden_states_3").Name = "hidden_states_5"
				return p
			},
			CheckEnv{}, "not from a stage before 4"},
		{RuleNameOrder,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan {
				p := basePlan(t, func(c *model.Config, o *Options) { o.LayersPerStage = 2 }) // 16 stages
				for i := range p.Graphs {                                                    // unpadded: _10_ sorts before _2_
					g := &p.Graphs[i]
					g.Name = strings.Replace(g.Name, "_0", "_", 1)
				}
				return p
			},
			CheckEnv{}, "Genie orders splits by graph name"},
		{RuleDupARCL,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan {
				p := basePlan(t, func(c *model.Config, o *Options) { o.AR = []int{128, 1} })
				g := p.Graphs[0] // stage 0 twice in variant ar128
				g.Name += "_copy"
				p.Graphs = append(p.Graphs, g)
				return p
			},
			CheckEnv{}, "Detected duplicate AR-128 CL-4096 graphs"},
		{RuleMissingGraph,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan { p := basePlan(t, nil); p.Graphs = slices.Delete(p.Graphs, 10, 11); return p },
			CheckEnv{}, "has no graph for stage 2"},
		{RuleSSDAR,
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.AR = []int{128, 32}; o.Dialog = ssd })
			},
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.AR = []int{16, 1}; o.Dialog = ssd })
			},
			CheckEnv{}, "nodes × (1 + len(branches)) = 10 × 3 = 30 tokens per step, but the largest AR is 16"},
		{RuleSpecAR,
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.Dialog = Dialog{Type: LADE, Window: 8, NGram: 3, GCap: 8} })
			},
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) {
					o.AR = []int{16, 1}
					o.Dialog = Dialog{Type: LADE, Window: 8, NGram: 3, GCap: 8}
				})
			},
			CheckEnv{}, "(window + gcap) × (ngram − 1) = (8 + 8) × 2"},
		{RuleAbsoluteTree,
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.Positional = Absolute; o.Dialog = Dialog{Type: SPD, DraftLen: 4} })
			},
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.Positional = Absolute; o.Dialog = ssd })
			},
			CheckEnv{}, "Genie fills position_ids with n_past"},
		{RuleRopeScaling,
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) {
					c.RopeScaling = model.RopeScaling{Type: model.RopeYarn, Factor: 4, OrigContext: 1024}
					o.Positional = Absolute
				})
			},
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) {
					c.RopeScaling = model.RopeScaling{Type: model.RopeYarn, Factor: 4, OrigContext: 1024}
					o.Positional = Rope
				})
			},
			CheckEnv{}, "scales RoPE with yarn"},
		{RuleGDNSpec,
			func(t *testing.T) *Plan {
				cfg := qwen35Config()
				return mustPlan(t, cfg, uniform(24, 10*mib), 100*mib, 100*mib, Options{AR: []int{128, 1}, CL: []int{4096}})
			},
			func(t *testing.T) *Plan {
				cfg := qwen35Config()
				return mustPlan(t, cfg, uniform(24, 10*mib), 100*mib, 100*mib, Options{AR: []int{128, 32}, CL: []int{4096}, Dialog: ssd})
			},
			CheckEnv{StateRuntime: true}, "18 Gated DeltaNet layers (0-2,4-6,8-10,12-14,16-18,20-22)"},
		{RuleRecurrent,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan {
				return mustPlan(t, qwen35Config(), uniform(24, 10*mib), 100*mib, 100*mib, Options{AR: []int{128, 1}, CL: []int{4096}})
			},
			CheckEnv{}, "past_ssm_L_in/_out for layers 0-2,4-6,8-10,12-14,16-18,20-22 (72 tensors)"},
		{RuleContextBytes,
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.LayersPerStage = 16 })
			},
			CheckEnv{}, "stage 0 (layers 0…15) holds 2.05 GiB"},
		{RuleContextBytes, // the env limit, not the plan's, decides
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			func(t *testing.T) *Plan { return basePlan(t, nil) },
			CheckEnv{MaxContextBytes: 800 * mib}, "over 800.0 MiB"},
		{RuleVTCMOneBit,
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.LayerTypes = []gguf.Type{gguf.Q1_0} })
			},
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.LayerTypes = []gguf.Type{gguf.Q1_0}; o.VTCMMB = 4 })
			},
			CheckEnv{}, "stage 0 has Q1_0 weights but vtcm_mb is 4"},
		{RuleContextSize,
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.ContextSize = 4096 })
			},
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.ContextSize = 8192 })
			},
			CheckEnv{}, "context->size=8192, but loaded max-CL=4096"},
		{RuleContextSize, // §8: context ≥ prompt + prefix + tree
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.AR = []int{32}; o.CL = []int{64}; o.Dialog = ssd })
			},
			func(t *testing.T) *Plan {
				return basePlan(t, func(c *model.Config, o *Options) { o.AR = []int{32}; o.CL = []int{64}; o.Dialog = ssd })
			},
			CheckEnv{ProbePromptTokens: 20}, "context 64 cannot hold 16 prefix + 20 prompt + 30 step tokens = 66"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			if vs := Check(tt.pass(t), CheckEnv{MaxContextBytes: tt.env.MaxContextBytes * 2, StateRuntime: tt.env.StateRuntime}); len(vs) != 0 {
				t.Errorf("passing plan: %v", vs)
			}
			vs := Check(tt.fail(t), tt.env)
			for _, v := range vs {
				if v.Rule == tt.rule && strings.Contains(v.Message, tt.msg) && v.Fix != "" {
					return
				}
			}
			t.Errorf("no %s violation with a fix and a message containing %q; got %v", tt.rule, tt.msg, vs)
		})
	}
}

// TestDetectARCL follows Genie's detection order (qnn-genie.md §0.3).
func TestDetectARCL(t *testing.T) {
	kv := func(n string, s ...int64) Tensor { return Tensor{Name: n, Shape: s} }
	tests := []struct {
		name   string
		g      Graph
		ar, cl int
	}{
		{"mask", Graph{Name: "x", Inputs: []Tensor{kv("attention_mask", 1, 1, 64, 2048)}}, 64, 2048},
		{"input_ids wins", Graph{Name: "x", Inputs: []Tensor{kv("input_ids", 1, 32), kv("attention_mask", 1, 1, 64, 2048)}}, 32, 2048},
		{"kv pair", Graph{Name: "x", Inputs: []Tensor{kv("past_key_3_in", 8, 1, 128, 1920)}, Outputs: []Tensor{kv("past_key_3_out", 8, 1, 128, 128)}}, 128, 2048},
		{"logits", Graph{Name: "x", Outputs: []Tensor{kv("logits", 1, 16, 32000)}}, 16, -1},
		{"name", Graph{Name: "m_ar32_cl1024_03_of_04", Inputs: []Tensor{kv("hidden_states_1", 1, 32, 64)}}, 32, 1024},
		{"name AR_ and big number", Graph{Name: "m_AR_8_ctx2048"}, 8, 2048},
		{"small numbers only", Graph{Name: "stage_3"}, -1, -1},
	}
	for _, tt := range tests {
		if ar, cl := DetectARCL(&tt.g); ar != tt.ar || cl != tt.cl {
			t.Errorf("%s: AR %d CL %d, want %d %d", tt.name, ar, cl, tt.ar, tt.cl)
		}
	}
}

// A stage of only DeltaNet layers has no attention_mask; Genie then reads
// AR and CL from the graph name, which the plan's names make right.
func TestCheckHybridStageWithoutAttention(t *testing.T) {
	cfg := qwen35Config()
	p := mustPlan(t, cfg, uniform(24, 10*mib), 100*mib, 100*mib, Options{LayersPerStage: 2, AR: []int{128, 1}, CL: []int{4096}})
	if find(p.Graphs[0].Inputs, AttentionMask) != nil {
		t.Fatalf("stage 0 (layers 0–1, DeltaNet only) has an attention_mask")
	}
	if vs := Check(p, CheckEnv{StateRuntime: true}); len(vs) != 0 {
		t.Errorf("violations: %v", vs)
	}
}

// Genie carries no recurrent state with any dialog: every dialog on a
// hybrid plan gets GENIE-RECURRENT-STATE, naming the tensors and the Genie
// version, unless the bundle's runtime feeds the state back; and the
// speculative rule no longer sends such models to Genie's basic dialog.
func TestCheckRecurrentStateEveryDialog(t *testing.T) {
	ssd := Dialog{Type: SSD, ForecastTokenCount: 2, Branches: []int{3, 2}, ForecastPrefix: 16, ForecastPrefixName: "fp"}
	for _, d := range []Dialog{{Type: Basic}, ssd, {Type: SPD, DraftLen: 4}, {Type: LADE, Window: 4, NGram: 3, GCap: 4}, {Type: Eaglet, DraftLen: 4, NBranches: 2, MaxTargetTokens: 16}} {
		t.Run(string(d.Type), func(t *testing.T) {
			p := mustPlan(t, qwen35Config(), uniform(24, 10*mib), 100*mib, 100*mib, Options{AR: []int{128, 32, 1}, CL: []int{4096}, Dialog: d})
			var got *Violation
			vs := Check(p, CheckEnv{})
			for i := range vs {
				if vs[i].Rule == RuleRecurrent {
					got = &vs[i]
				}
				if vs[i].Rule == RuleGDNSpec && strings.Contains(vs[i].Fix, "basic dialog") {
					t.Errorf("%s still recommends the basic dialog: %s", RuleGDNSpec, vs[i].Fix)
				}
			}
			if got == nil {
				t.Fatalf("no %s: %v", RuleRecurrent, vs)
			}
			for _, want := range []string{"past_conv_L_in/_out", "past_ssm_L_in/_out", "layers 0-2,4-6", "QAIRT 2.40", "basic included"} {
				if !strings.Contains(got.Message, want) {
					t.Errorf("message %q lacks %q", got.Message, want)
				}
			}
			if !strings.Contains(got.Fix, "qnnprep's staged runtime") || !strings.Contains(got.Fix, "--allow-recurrent-state") {
				t.Errorf("fix %q does not say what works", got.Fix)
			}
			for _, v := range Check(p, CheckEnv{StateRuntime: true}) {
				if v.Rule == RuleRecurrent {
					t.Errorf("reported with a state-feeding runtime: %v", v)
				}
			}
		})
	}
	if n := len(StateTensors(basePlan(t, nil))); n != 0 {
		t.Errorf("llama plan has %d state tensors", n)
	}
}
