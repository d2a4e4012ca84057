package pipeline

import (
	"fmt"
	"io"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/scaleout"
	"github.com/qnnprep/qnnprep/shard"
)

// Step names, in the order Build runs them.
const (
	StepQuantize = "quantize"
	StepPlan     = "plan"
	StepCheck    = "check"
	StepExport   = "export"
	StepSimulate = "simulate"
	StepDraft    = "draft" // only with Options.Draft or Options.Eagle3
	StepSDK      = "sdk"
	StepBundle   = "bundle"
	StepVerify   = "verify"
)

// Steps lists the step names in order (StepDraft, between simulate and
// sdk, only runs for an spd build with a draft model).
var Steps = []string{StepQuantize, StepPlan, StepCheck, StepExport, StepSimulate, StepSDK, StepBundle, StepVerify}

// Step statuses.
const (
	StatusOK      = "ok"
	StatusDryRun  = "dry-run" // the SDK was not run; its commands were printed
	StatusFailed  = "failed"
	StatusNotRun  = "not run"
	StatusPartial = "partial" // verify of the whole model only (Options.WholeOnly)
	StatusSkipped = "skipped" // verify with Options.NoVerify, simulate with Options.NoSimulate
)

// File names under OutDir.
const (
	WorkDir      = "work"
	QModelName   = "qmodel.gguf"
	PlanName     = "plan.json"
	ONNXDir      = "onnx"
	SDKDir       = "sdk"
	CommandsName = "sdk_commands.sh"
	GoldenName   = "golden.json"
	RangesName   = "ranges.json" // the calibration's ranges (onnx.Calibration)
	BundleDir    = "bundle"
	SummaryName  = "summary.json"
)

// StagedFunc returns a decoder that runs engine e's model through plan p's
// stages (the runtime's staged executor).
type StagedFunc func(e *runtime.Engine, p *shard.Plan) (golden.Decoder, error)

// Options say what to build and how.
type Options struct {
	Source    string // HF directory, .safetensors or .gguf
	OutDir    string
	Recipe    *quantize.Recipe
	Overrides []quantize.Rule
	// Metadata is added to the qmodel (the source's tokenizer.* keys, for
	// example).
	Metadata gguf.Metadata
	Plan     shard.Options
	// Name is the graph-name prefix; "" means the source's general.name or
	// file name.
	Name string
	// SkipCheck builds a plan that breaks Genie's contract (it will not
	// load on a device); the violations are still reported.
	SkipCheck bool
	// AllowRecurrentState builds a plan whose graphs carry past_conv/past_ssm
	// state, which Genie does not feed back between calls: the bundle then
	// needs a runtime that does (as qnnprep's staged runtime does), and its
	// manifest and the Result say so.
	AllowRecurrentState bool

	Export onnx.ExportOptions
	// Calibration, if set, takes the activation ranges of the qmodel (and
	// of the draft) before their export (Calibrate) and writes them to
	// work/ranges.json (work/draft/ranges.json); Export.Ranges win over
	// them. A text calibration without a Tokenizer uses the bundle's. A
	// greedy one is cut to the model's context length.
	Calibration *CalibOptions
	// NoSimulate skips the simulate step, which decodes the prompts with
	// the exported encodings simulated (SimulateEncodings) and fails the
	// build (Result.Pass) when they lose more than its thresholds allow.
	NoSimulate bool

	SoC string
	// SDK is the located SDK; nil (or DryRun) stops before the tools and
	// prints their commands, writing every file the SDK does not produce.
	SDK    *qnnpack.SDK
	DryRun bool
	// Tokenizer is the bundle's tokenizer: a Hugging Face tokenizer.json
	// (copied), or a vocabulary to write one from (a GGUF, a llama2.c
	// tokenizer.bin). "" means the source's tokenizer.json, else its
	// tokenizer.ggml.* vocabulary (Metadata's or a GGUF source's); Build
	// fails when there is none (MakeBundleTokenizer).
	Tokenizer     string
	ConverterArgs []string
	Parallel      int           // SDK jobs at once (0: 2)
	Timeout       time.Duration // per SDK job (0: none)
	Force         bool          // ignore the SDK cache
	// Cache shares SDK job outputs with other builds and machines
	// (scaleout.OpenCache); nil keeps them in the work directory only.
	Cache qnnpack.Cache
	// Shard, when set, builds only this shard's stages into the work
	// directory and Cache and writes no bundle: 'qnnprep bundle assemble'
	// writes it once every shard has run (package scaleout).
	Shard *scaleout.Shard

	// Prompts are decoded for Tokens steps each by the source (golden),
	// the qmodel whole and the qmodel through the plan. Empty means
	// DefaultPrompts.
	Prompts []golden.Prompt
	Tokens  int // 0 means 16
	TopK    int // logits kept per golden step (0 means 8)
	// Thresholds replace verify's defaults (golden.DefaultCriteria for
	// the recipe) where set.
	Thresholds golden.Overrides
	// NoVerify skips the verify step (decoding a large source on the CPU
	// takes a while); Result.Pass then only says that every step ran.
	NoVerify bool
	// Staged, if set, replaces the runtime's staged executor
	// (runtime.NewStaged) in the verify step; tests give one that
	// misbehaves.
	Staged StagedFunc
	// WholeOnly verifies the qmodel whole only, not through the plan's
	// stages, and the verify step says so (StatusPartial).
	WholeOnly bool
	Threads   int // matmul threads (0: 2); results do not depend on it

	// Draft is the spd dialog's draft model.
	Draft *Draft
	// Eagle3 is the eaglet dialog's EAGLE-3 head: a GGUF in llama.cpp's
	// eagle3 layout or a Hugging Face head directory (runtime.OpenEagle3).
	// Its draft graphs, the target's taps and the head's fc in the last
	// stage are exported, compiled and bundled (shard/EAGLET.md).
	Eagle3 string
	// ForecastEmbeddings is the ssd-q1 dialog's trained forecast-token
	// embeddings (model.ReadForecastEmbeddings: safetensors or GGUF,
	// forecast-token-count rows of the hidden size). They join the first
	// stage's embedding table and the bundle; verify decodes the dialog
	// with them through the plan.
	ForecastEmbeddings string
	// ForecastPrefix is a Genie KV cache file holding the ssd-q1 forecast
	// prefix; "" writes a zero placeholder (qnnpack.BuildOptions).
	ForecastPrefix string

	QnnprepVersion string
	// Commands receives the SDK command lines (one per line) when the SDK
	// is not run; Log one line per SDK job when it is. Either may be nil.
	Commands io.Writer
	Log      io.Writer
	// Progress reports work within a step: bytes for quantize, graphs for
	// export, prompts for verify.
	Progress func(step string, done, total int64)
	// OnStep is called when a step starts (Status "") and when it ends.
	OnStep func(s StepResult)
}

// Draft is a draft model for the spd dialog. It is quantized with the
// target's recipe, planned, checked and exported the same way (under
// OUTDIR/work/draft/) and compiled by the SDK; its context binaries go into
// the bundle's draft/ directory.
type Draft struct {
	Source string
	// Plan shapes the draft's graphs; the zero value means one stage and
	// the target's AR and CL lists. The dialog is always basic.
	Plan shard.Options
}

// DefaultPrompts are three token-id prompts any vocabulary holds: BOS (if
// any) followed by a few spread-out ids.
func DefaultPrompts(cfg model.Config) []golden.Prompt {
	v := int32(cfg.VocabSize)
	var ps []golden.Prompt
	for i, seeds := range [][]int32{{11, 29, 47}, {101, 7}, {263, 5, 83, 19}} {
		var ids []int32
		if cfg.BOS >= 0 && int32(cfg.BOS) < v {
			ids = append(ids, int32(cfg.BOS))
		}
		for _, s := range seeds {
			ids = append(ids, s%v)
		}
		ps = append(ps, golden.Prompt{Name: fmt.Sprintf("ids %d", i+1), IDs: ids})
	}
	return ps
}
