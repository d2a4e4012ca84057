package pipeline

import (
	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/shard"
)

// StepResult is what one step did.
type StepResult struct {
	Name    string   `json:"name"`
	Status  string   `json:"status"`
	Seconds float64  `json:"seconds"`
	Outputs []string `json:"outputs,omitempty"` // paths relative to OutDir
	Note    string   `json:"note,omitempty"`
}

// Verification is the verify step's outcome.
type Verification struct {
	Prompts int `json:"prompts"`
	Tokens  int `json:"tokens"` // per prompt
	// Whole is the qmodel decoded whole against the source's golden
	// (quality of the quantization).
	Whole *golden.Report `json:"whole"`
	// Staged is the qmodel decoded through the plan's stages; nil when
	// no staged executor is available.
	Staged *golden.Report `json:"staged,omitempty"`
	// StagedEqualsWhole is set when Staged ran: every prompt's staged
	// tokens equal the whole-model tokens.
	StagedEqualsWhole *bool `json:"staged_equals_whole,omitempty"`
	// Speculative is the spd dialog's decode on the CPU: the draft qmodel
	// proposes draft-len tokens, the target qmodel verifies them; it must
	// give exactly the whole model's tokens.
	Speculative            *golden.Report `json:"speculative,omitempty"`
	SpeculativeEqualsWhole *bool          `json:"speculative_equals_whole,omitempty"`
	Note                   string         `json:"note,omitempty"`
}

// Result is what Build did; it is also written as OutDir/summary.json.
type Result struct {
	Source     string            `json:"source"`
	OutDir     string            `json:"out_dir"`
	Recipe     string            `json:"recipe"`
	SoC        string            `json:"soc"`
	DryRun     bool              `json:"dry_run"`
	Steps      []StepResult      `json:"steps"`
	QModel     string            `json:"qmodel,omitempty"`
	Quant      *quantize.Report  `json:"-"`
	Bytes      int64             `json:"qmodel_bytes,omitempty"`
	BPW        float64           `json:"bits_per_weight,omitempty"`
	Plan       *shard.Plan       `json:"-"`
	PlanPath   string            `json:"plan,omitempty"`
	Violations []shard.Violation `json:"violations,omitempty"`
	// RecurrentState lists the past_conv/past_ssm tensors the bundle's
	// runtime must feed back between calls: Genie does not, so the bundle
	// needs a runtime that does (as qnnprep's staged runtime does).
	RecurrentState []string      `json:"recurrent_state,omitempty"`
	Commands       []string      `json:"sdk_commands,omitempty"`
	Bundle         string        `json:"bundle,omitempty"`
	Verify         *Verification `json:"verify,omitempty"`
	// Ranges is the calibration's ranges file, when the build calibrated.
	Ranges string `json:"ranges,omitempty"`
	// Simulation is the simulate step's report: the qmodel decoded
	// through the plan with the exported encodings simulated, against its
	// float decode.
	Simulation *golden.Report `json:"simulation,omitempty"`
}

// Step returns the named step's result, or nil.
func (r *Result) Step(name string) *StepResult {
	for i := range r.Steps {
		if r.Steps[i].Name == name {
			return &r.Steps[i]
		}
	}
	return nil
}

// Pass reports whether every step that ran succeeded, the simulation (if
// it ran) met its thresholds, and verify (unless skipped) ran, with the
// staged and speculative decodes, where they ran, giving the whole model's
// tokens and the whole model meeting the criteria.
func (r *Result) Pass() bool {
	for _, s := range r.Steps {
		if s.Status == StatusFailed {
			return false
		}
	}
	if r.Simulation != nil && !r.Simulation.Pass {
		return false
	}
	v := r.Verify
	if v == nil {
		s := r.Step(StepVerify)
		return s != nil && s.Status == StatusSkipped
	}
	return (v.StagedEqualsWhole == nil || *v.StagedEqualsWhole) &&
		(v.SpeculativeEqualsWhole == nil || *v.SpeculativeEqualsWhole) && v.Whole != nil && v.Whole.Pass
}

// StepError is a failure of one step.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }
