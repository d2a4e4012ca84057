package qnnpack

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

// genieDoc mirrors the parts of genie_config.json the tests compare.
type genieEngine struct {
	Version  int    `json:"version"`
	NThreads int    `json:"n-threads"`
	Role     string `json:"role"`
	Backend  struct {
		Type       string `json:"type"`
		Extensions string `json:"extensions"`
		QnnHtp     struct {
			KVDim   int  `json:"kv-dim"`
			UseMmap bool `json:"use-mmap"`
		} `json:"QnnHtp"`
	} `json:"backend"`
	Model struct {
		Type   string `json:"type"`
		Binary struct {
			CtxBins []string `json:"ctx-bins"`
		} `json:"binary"`
		Pos struct {
			Type      string  `json:"type"`
			RopeDim   int     `json:"rope-dim"`
			RopeTheta float64 `json:"rope-theta"`
		} `json:"positional-encoding"`
	} `json:"model"`
}

type genieDoc struct {
	Dialog struct {
		Type    string `json:"type"`
		Context struct {
			BOS       int `json:"bos-token"`
			EOS       int `json:"eos-token"`
			Size      int `json:"size"`
			NVocab    int `json:"n-vocab"`
			DraftNVoc int `json:"draft-n-vocab"`
		} `json:"context"`
		Tokenizer struct {
			Path string `json:"path"`
		} `json:"tokenizer"`
		Engine json.RawMessage `json:"engine"`
		SSD    *struct {
			ForecastTokenCount int    `json:"forecast-token-count"`
			Branches           []int  `json:"branches"`
			ForecastPrefix     int    `json:"forecast-prefix"`
			ForecastPrefixName string `json:"forecast-prefix-name"`
		} `json:"ssd-q1"`
		SPD *struct {
			DraftLen int `json:"draft-len"`
		} `json:"spd"`
		LADE *struct {
			UpdateMode string `json:"update-mode"`
			Window     int    `json:"window"`
			NGram      int    `json:"ngram"`
			GCap       int    `json:"gcap"`
		} `json:"lade"`
	} `json:"dialog"`
}

func TestGenieConfigMatchesPlan(t *testing.T) {
	cfg := fakesdk.ModelConfig(6)
	cfg.RopeDim = 12 // partial rotary: rope-dim is rotated dims / 2
	cfg.BOS, cfg.EOS = 7, 9
	draftCfg := fakesdk.ModelConfig(2)
	draftCfg.HeadDim, draftCfg.RopeDim = 8, 8
	draft := testPlan(t, draftCfg, "draft", shard.Options{Stages: 1})

	ssd := shard.Dialog{Type: shard.SSD, ForecastTokenCount: 3, Branches: []int{2, 2}, ForecastPrefix: 8, ForecastPrefixName: "ssd_prefix"}
	for _, tc := range []struct {
		name   string
		dialog shard.Dialog
		ar     []int
	}{
		{"basic", shard.Dialog{Type: shard.Basic}, []int{16, 1}},
		{"ssd-q1", ssd, []int{32, 1}}, // 7 nodes × 3 = 21 tokens per step
		{"spd", shard.Dialog{Type: shard.SPD, DraftLen: 4}, []int{16, 1}},
		{"lade", shard.Dialog{Type: shard.LADE, Window: 2, NGram: 3, GCap: 2}, []int{16, 1}}, // (2+2)×2 = 8 per step
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPlan(t, cfg, "m", shard.Options{Stages: 3, AR: tc.ar, CL: []int{128, 256}, Dialog: tc.dialog, ContextSize: 200})
			bins := []string{"m_01_of_03.bin", "m_02_of_03.bin", "m_03_of_03.bin"}
			o := GenieOptions{Target: EngineModel{Plan: p, Config: cfg, CtxBins: bins}}
			if tc.dialog.Type == shard.SPD {
				o.Draft = &EngineModel{Plan: draft, Config: draftCfg, CtxBins: []string{"draft/draft_01_of_01.bin"}}
			}
			b, err := GenieConfig(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := ValidateGenieConfig(b); err != nil {
				t.Fatal(err)
			}
			var doc genieDoc
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			d := doc.Dialog
			if d.Type != tc.name || d.Context.BOS != 7 || d.Context.EOS != 9 || d.Context.Size != 200 || d.Context.NVocab != cfg.VocabSize || d.Tokenizer.Path != "tokenizer.json" {
				t.Errorf("dialog %+v", d)
			}
			var engines []genieEngine
			if tc.dialog.Type == shard.SPD {
				if err := json.Unmarshal(d.Engine, &engines); err != nil {
					t.Fatal(err)
				}
				if len(engines) != 2 || engines[0].Role != "draft" || engines[1].Role != "target" {
					t.Fatalf("spd engines %+v", engines)
				}
				if d.SPD == nil || d.SPD.DraftLen != 4 || d.Context.DraftNVoc != draftCfg.VocabSize {
					t.Errorf("spd block %+v, draft-n-vocab %d", d.SPD, d.Context.DraftNVoc)
				}
				dr := engines[0]
				if !slices.Equal(dr.Model.Binary.CtxBins, []string{"draft/draft_01_of_01.bin"}) || dr.Backend.QnnHtp.KVDim != 8 || dr.Model.Pos.RopeDim != 4 {
					t.Errorf("draft engine %+v", dr)
				}
				engines = engines[1:]
			} else {
				var e genieEngine
				if err := json.Unmarshal(d.Engine, &e); err != nil {
					t.Fatal(err)
				}
				engines = []genieEngine{e}
			}
			e := engines[0]
			if !slices.Equal(e.Model.Binary.CtxBins, bins) || e.Model.Type != "binary" || e.Backend.Type != "QnnHtp" || e.Backend.Extensions != "htp_backend_ext_config.json" {
				t.Errorf("engine %+v", e)
			}
			if e.Backend.QnnHtp.KVDim != cfg.HeadDim || e.Model.Pos.Type != "rope" || e.Model.Pos.RopeDim != 6 || e.Model.Pos.RopeTheta != cfg.RopeTheta {
				t.Errorf("kv-dim %d, positional %+v", e.Backend.QnnHtp.KVDim, e.Model.Pos)
			}
			if (d.SSD != nil) != (tc.dialog.Type == shard.SSD) {
				t.Fatalf("ssd-q1 block %+v", d.SSD)
			}
			if (d.LADE != nil) != (tc.dialog.Type == shard.LADE) || d.LADE != nil && (d.LADE.Window != 2 || d.LADE.NGram != 3 || d.LADE.GCap != 2 || d.LADE.UpdateMode != "ALWAYS_FWD_ONE") {
				t.Errorf("lade block %+v", d.LADE)
			}
			if d.SSD != nil && (d.SSD.ForecastTokenCount != 3 || !slices.Equal(d.SSD.Branches, []int{2, 2}) || d.SSD.ForecastPrefix != 8 || d.SSD.ForecastPrefixName != "ssd_prefix") {
				t.Errorf("ssd-q1 %+v", d.SSD)
			}
		})
	}
}

func TestGenieConfigErrors(t *testing.T) {
	cfg := fakesdk.ModelConfig(4)
	p := testPlan(t, cfg, "m", shard.Options{})
	bins := []string{"a.bin", "b.bin"}
	for _, tc := range []struct {
		name string
		mod  func(*GenieOptions)
		want string
	}{
		{"no eos", func(o *GenieOptions) { o.Target.Config.EOS = -1 }, "EOS"},
		{"bins", func(o *GenieOptions) { o.Target.CtxBins = bins[:1] }, "2 stages but 1 context binaries"},
		{"theta", func(o *GenieOptions) { o.Target.Config.RopeTheta = 0 }, "rope theta"},
		{"llama3 without parameters", func(o *GenieOptions) {
			o.Target.Config.RopeFreqFactors = []float32{1, 2}
			o.Target.Config.RopeScaling = model.RopeScaling{Type: model.RopeLlama3, Factor: 2}
		}, "original-max-position-embeddings"},
		{"yarn on rope positions", func(o *GenieOptions) {
			o.Target.Config.RopeScaling = model.RopeScaling{Type: model.RopeYarn, Factor: 4}
		}, shard.RuleRopeScaling},
		{"draft without spd", func(o *GenieOptions) { o.Draft = &o.Target }, "does not use one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := GenieOptions{Target: EngineModel{Plan: p, Config: cfg, CtxBins: bins}}
			tc.mod(&o)
			_, err := GenieConfig(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	spd := testPlan(t, cfg, "m", shard.Options{Dialog: shard.Dialog{Type: shard.SPD, DraftLen: 3}})
	if _, err := GenieConfig(GenieOptions{Target: EngineModel{Plan: spd, Config: cfg, CtxBins: bins}}); err == nil || !strings.Contains(err.Error(), "draft model") {
		t.Errorf("spd without a draft: %v", err)
	}
}

// validConfig is a hand-written genie_config.json in the shape of Genie's
// examples, independent of GenieConfig.
const validConfig = `{"dialog": {"version": 1, "type": "ssd-q1",
 "context": {"version": 1, "bos-token": 1, "eos-token": [2, 3], "size": 4096, "n-vocab": 32000},
 "sampler": {"version": 1, "seed": 42, "temp": 0.8, "top-k": 40, "top-p": 0.95},
 "tokenizer": {"version": 1, "path": "tokenizer.json"},
 "engine": {"version": 1, "n-threads": 3,
  "backend": {"version": 1, "type": "QnnHtp", "extensions": "htp_backend_ext_config.json",
   "QnnHtp": {"version": 1, "spill-fill-bufsize": 320000000, "use-mmap": true, "mmap-budget": 0, "poll": true, "cpu-mask": "0xe0", "kv-dim": 128}},
  "model": {"version": 1, "type": "binary", "binary": {"version": 1, "ctx-bins": ["a.bin", "b.bin"]},
   "positional-encoding": {"type": "rope", "rope-dim": 64, "rope-theta": 10000}}},
 "ssd-q1": {"version": 1, "ssd-version": 1, "forecast-token-count": 4, "branches": [4, 4], "forecast-prefix": 16, "forecast-prefix-name": "kv-cache"}}}`

func TestValidateGenieConfig(t *testing.T) {
	if err := ValidateGenieConfig([]byte(validConfig)); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	r := strings.NewReplacer
	for _, tc := range []struct {
		name string
		edit *strings.Replacer
		want string
	}{
		{"unknown top key", r(`{"dialog": {`, `{"extra": 1, "dialog": {`), `(top level): unknown key "extra"`},
		{"unknown dialog key", r(`"version": 1, "type": "ssd-q1"`, `"version": 1, "typo": 1, "type": "ssd-q1"`), `dialog: unknown key "typo"`},
		{"unknown QnnHtp key", r(`"kv-dim": 128`, `"kv-dim": 128, "kv_dim": 128`), `dialog.engine.backend.QnnHtp: unknown key "kv_dim"`},
		{"missing context.size", r(`"size": 4096, `, ``), `dialog.context: missing mandatory key "size"`},
		{"missing n-threads", r(`"n-threads": 3,`, ``), `dialog.engine: missing mandatory key "n-threads"`},
		{"missing QnnHtp poll", r(`"poll": true, `, ``), `missing mandatory key "poll"`},
		{"size as string", r(`"size": 4096`, `"size": "4096"`), `dialog.context.size: want non-negative integer`},
		{"negative size", r(`"size": 4096`, `"size": -1`), `dialog.context.size: want non-negative integer`},
		{"float token", r(`"bos-token": 1`, `"bos-token": 1.5`), `dialog.context.bos-token: want integer`},
		{"bool as string", r(`"use-mmap": true`, `"use-mmap": "true"`), `dialog.engine.backend.QnnHtp.use-mmap: want boolean`},
		{"bins not strings", r(`["a.bin", "b.bin"]`, `["a.bin", 2]`), `ctx-bins[1]: want string`},
		{"bad enum", r(`"type": "rope"`, `"type": "yarn"`), `"yarn" is not one of rope, absolute, alibi`},
		{"block mismatch", r(`"type": "ssd-q1"`, `"type": "basic"`), `dialog.ssd-q1: block given but dialog.type is "basic"`},
		{"block missing", r(`"ssd-q1": {`, `"lade": {`), `unknown key`},
		{"branches too long", r(`"branches": [4, 4]`, `"branches": [4, 4, 4, 4, 4]`), `5 levels but forecast-token-count is 4`},
		{"ssd version", r(`{"version": 1, "ssd-version"`, `{"version": 2, "ssd-version"`), `dialog.ssd-q1.version: must be 1`},
		{"p-threshold alone", r(`"forecast-prefix": 16,`, `"forecast-prefix": 16, "p-threshold": 0.5,`), `only allowed with n-streams > 1`},
		{"legacy with positional", r(`"kv-dim": 128`, `"kv-dim": 128, "pos-id-dim": 64`), `legacy key given together with model.positional-encoding`},
		{"spd one engine", r(`"type": "ssd-q1"`, `"type": "spd"`, `"ssd-q1": {"version": 1, "ssd-version": 1, "forecast-token-count": 4, "branches": [4, 4], "forecast-prefix": 16, "forecast-prefix-name": "kv-cache"}`, `"spd": {"version": 1, "draft-len": 3}`), `needs two engines with roles draft and target`},
		{"model block missing", r(`"binary": {"version": 1, "ctx-bins": ["a.bin", "b.bin"]},`, ``), `model.type "binary" needs a "binary" block`},
		{"not json", r(`{"dialog"`, `{dialog`), `not JSON`},
		{"top level array", r(`{"dialog": {`, `[{"dialog": {`, `"kv-cache"}}}`, `"kv-cache"}}}]`), `want an object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateGenieConfig([]byte(tc.edit.Replace(validConfig)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func FuzzValidateGenieConfig(f *testing.F) {
	f.Add([]byte(validConfig))
	f.Add([]byte(`{"dialog": {"version": 1, "type": "spd", "engine": [{}, {"role": "draft"}], "spd": {}}}`))
	f.Add([]byte(`{"dialog": {"engine": [], "context": null}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ValidateGenieConfig(data) // must not panic
	})
}

// A chat model's end-of-turn tokens join EOS in eos-token, where Genie
// stops at each; without them eos-token stays EOS alone.
func TestGenieConfigEOG(t *testing.T) {
	cfg := fakesdk.ModelConfig(2)
	cfg.BOS, cfg.EOS = 1, 9
	p := testPlan(t, cfg, "m", shard.Options{Stages: 1})
	for _, c := range []struct {
		eog  []int32
		want string
	}{
		{nil, `9`},
		{[]int32{9}, `9`},
		{[]int32{45, 9, 12, 45}, `[9,12,45]`},
	} {
		b, err := GenieConfig(GenieOptions{Target: EngineModel{Plan: p, Config: cfg, CtxBins: []string{"m_1_of_1.bin"}}, EOG: c.eog})
		if err != nil {
			t.Fatal(err)
		}
		var g struct {
			Dialog struct {
				Context struct {
					EOS json.RawMessage `json:"eos-token"`
				}
			}
		}
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		json.Compact(&compact, g.Dialog.Context.EOS)
		if compact.String() != c.want {
			t.Errorf("EOG %v: eos-token %s, want %s", c.eog, compact.String(), c.want)
		}
	}
}

// A Llama 3 model's rope-scaling parameters reach Genie's positional
// encoding, whichever file they came from (config.json's values, or
// recovered from a GGUF's rope_freqs.weight), and pass Genie's schema.
func TestGenieConfigLlama3RopeScaling(t *testing.T) {
	cfg := fakesdk.ModelConfig(4)
	s := model.RopeScaling{Type: model.RopeLlama3, Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192}
	cfg.RopeScaling = s
	cfg.RopeFreqFactors = model.Llama3FreqFactors(cfg.RopeTheta, cfg.RopeDim, s)
	p := testPlan(t, cfg, "m", shard.Options{})
	data, err := GenieConfig(GenieOptions{Target: EngineModel{Plan: p, Config: cfg, CtxBins: []string{"a.bin", "b.bin"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateGenieConfig(data); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Dialog struct {
			Engine struct {
				Model struct {
					Pos struct {
						Scaling map[string]any `json:"rope-scaling"`
					} `json:"positional-encoding"`
				} `json:"model"`
			} `json:"engine"`
		} `json:"dialog"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"rope-type": "llama3", "factor": 32.0, "low-freq-factor": 1.0, "high-freq-factor": 4.0, "original-max-position-embeddings": 8192.0}
	if sc := got.Dialog.Engine.Model.Pos.Scaling; !reflect.DeepEqual(sc, want) {
		t.Errorf("rope-scaling %v, want %v", sc, want)
	}
}
