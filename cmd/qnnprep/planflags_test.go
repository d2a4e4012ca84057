package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// planFlagCases give each flag of addPlanFlags (shared by plan and build)
// a value and what it must change in plan.json.
var planFlagCases = []struct {
	name  string
	args  []string
	check func(p *shard.Plan) string // "" when the plan shows the flag
}{
	{"layers-per-stage", []string{"--layers-per-stage", "1"}, func(p *shard.Plan) string {
		return want(p.Split == "layers-per-stage" && len(p.Stages) == p.Model.Layers, "split %s, %d stages", p.Split, len(p.Stages))
	}},
	// Stage sizes are device bytes: q8_0 layers hold 8-byte scale/offset
	// pairs per block, so the limit must hold the synthetic llama's first
	// layer with its embedding (762 KiB on the device).
	{"max-stage-bytes", []string{"--max-stage-bytes", "1MiB"}, func(p *shard.Plan) string {
		return want(p.Split == "bytes" && p.MaxStageBytes == 1<<20 && len(p.Stages) >= 2, "split %s, max %d, %d stages", p.Split, p.MaxStageBytes, len(p.Stages))
	}},
	// --ar and --cl add to the base 32,1 and 128 (pflag slices append).
	{"arc", []string{"--ar", "64", "--cl", "64", "--arc"}, func(p *shard.Plan) string {
		i := slices.IndexFunc(p.Variants, func(v shard.Variant) bool { return v.AR == 64 && v.CL == 64 })
		return want(i >= 0 && p.Variants[i].Mode == shard.ModeARc, "variants %+v", p.Variants)
	}},
	{"positional", []string{"--positional", "absolute"}, func(p *shard.Plan) string {
		return want(p.Positional == shard.Absolute, "positional %s", p.Positional)
	}},
	{"ssd-q1", []string{"--dialog", "ssd-q1", "--forecast-token-count", "2", "--branches", "2", "--forecast-prefix", "16", "--forecast-prefix-name", "fp"}, func(p *shard.Plan) string {
		d := p.Dialog
		return want(d.Type == shard.SSD && d.ForecastTokenCount == 2 && slices.Equal(d.Branches, []int{2}) && d.ForecastPrefix == 16 && d.ForecastPrefixName == "fp",
			"dialog %+v", d.Dialog)
	}},
	{"spd", []string{"--dialog", "spd", "--draft-len", "3"}, func(p *shard.Plan) string {
		return want(p.Dialog.Type == shard.SPD && p.Dialog.DraftLen == 3 && p.Dialog.StepTokens == 4, "dialog %+v", p.Dialog)
	}},
	{"lade", []string{"--dialog", "lade", "--window", "4", "--ngram", "3", "--gcap", "2"}, func(p *shard.Plan) string {
		d := p.Dialog
		return want(d.Type == shard.LADE && d.Window == 4 && d.NGram == 3 && d.GCap == 2 && d.StepTokens == 12, "dialog %+v", d)
	}},
	{"eaglet", []string{"--dialog", "eaglet", "--draft-len", "2", "--n-branches", "2", "--max-tokens-target-can-evaluate", "8"}, func(p *shard.Plan) string {
		d := p.Dialog
		return want(d.Type == shard.Eaglet && d.DraftLen == 2 && d.NBranches == 2 && d.MaxTargetTokens == 8 && d.StepTokens == 8, "dialog %+v", d)
	}},
	{"vtcm-mb", []string{"--vtcm-mb", "4"}, func(p *shard.Plan) string { return want(p.VTCMMB == 4, "vtcm_mb %d", p.VTCMMB) }},
	{"context-size", []string{"--context-size", "100"}, func(p *shard.Plan) string {
		return want(p.ContextSize == 100, "context_size %d", p.ContextSize)
	}},
	{"probe-prompt", []string{"--probe-prompt", "5"}, func(p *shard.Plan) string {
		return want(p.Dialog.ProbePromptTokens == 5, "probe_prompt_tokens %d", p.Dialog.ProbePromptTokens)
	}},
}

// want returns "" when ok, else the formatted description of what was found.
func want(ok bool, format string, args ...any) string {
	if ok {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

// TestPlanFlags: every plan flag changes plan.json as documented.
func TestPlanFlags(t *testing.T) {
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Skipf("fixture: %v", err)
	}
	for _, tt := range planFlagCases {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "plan.json")
			args := append([]string{"plan", storiesGGUF, "--ar", "32,1", "--cl", "128", "-o", path}, tt.args...)
			var code int
			captureStdout(t, func() { code = run(args) })
			if code != 0 {
				t.Fatalf("%v: exit %d", tt.args, code)
			}
			p, err := shard.ReadPlan(path)
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(p); msg != "" {
				t.Errorf("%v: %s", tt.args, msg)
			}
		})
	}
}

// TestBuildPlanFlags: build passes every plan flag to the plan it writes.
// Some settings cannot build to the end on this model (absolute positions
// are not exported; ssd-q1 is given forecast rows, eaglet an EAGLE-3 head,
// whose draft graphs the plan must then hold);
// build then fails at that step with its message, after writing the plan.
func TestBuildPlanFlags(t *testing.T) {
	src := synthLlamaGGUF(t)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	for _, tt := range planFlagCases {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"build", src, out, "--recipe", "q8_0", "--ar", "32,1", "--cl", "128", "--calibrate", "0", "--no-verify", "-q"}, tt.args...)
			switch tt.name {
			case "spd":
				args = append(args, "--draft", src)
			case "ssd-q1":
				args = append(args, "--forecast-embeddings", writeForecastFile(t, 2, 256))
			case "eaglet":
				head := filepath.Join(t.TempDir(), "eagle3.gguf")
				if err := synth.WriteEagle3(head, synth.Config(model.Llama, true), 40, 1); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--eagle3", head)
			}
			var code int
			stdout := captureStdout(t, func() { code = run(args) })
			p, err := shard.ReadPlan(filepath.Join(out, "work", "plan.json"))
			if err != nil {
				t.Fatalf("%v: exit %d, %v\n%s", tt.args, code, err, stdout)
			}
			if msg := tt.check(p); msg != "" {
				t.Errorf("%v: %s", tt.args, msg)
			}
			if tt.name == "eaglet" && (p.Draft == nil || p.Draft.Head.DraftVocab != 40) {
				t.Errorf("build --eagle3: plan draft %+v, want the head's graphs", p.Draft)
			}
		})
	}
}
