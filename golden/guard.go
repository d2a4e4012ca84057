package golden

import (
	"errors"
	"fmt"
	"strings"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

// ErrModelMismatch is returned when an artifact was not made from the model
// a golden file was recorded from.
var ErrModelMismatch = errors.New("model fingerprint does not match the golden file")

// How a golden file was accepted for an artifact (Acceptance.Rule).
const (
	RuleSameModel = "same model"                               // the artifact is the golden's source
	RuleDerived   = "derived from the golden's source"         // its lineage passes through the source
	RuleOverride  = "override: made elsewhere from the source" // --source-fingerprint
)

// Acceptance is why a golden file was accepted for an artifact; reports
// carry it so that an override is never silent.
type Acceptance struct {
	Golden   string   `json:"golden_sha256"`
	Artifact string   `json:"artifact_sha256"` // the artifact's source fingerprint, or its own
	Rule     string   `json:"rule"`
	Steps    []string `json:"steps,omitempty"`    // what made the artifact from the golden's source
	Override string   `json:"override,omitempty"` // the fingerprint the user vouched for
}

func (a *Acceptance) String() string {
	switch a.Rule {
	case RuleDerived:
		return fmt.Sprintf("%s (%s)", a.Rule, strings.Join(a.Steps, " → "))
	case RuleOverride:
		return fmt.Sprintf("%s: the artifact (sha256 %s) was declared made from sha256 %s", a.Rule, a.Artifact, a.Override)
	}
	return a.Rule
}

// Accept is the one rule by which every command decides whether f may
// score m: m is the golden's source, or was derived from it by qnnprep (a
// qmodel, a sparse variant, a pruned model: its lineage keys pass through
// the source's fingerprint), or override — a fingerprint the user gives
// for a model made elsewhere from the same weights (a llama.cpp GGUF) —
// equals the golden's. Anything else is refused, naming both fingerprints.
func (f *File) Accept(m *model.Model, override string) (*Acceptance, error) {
	want := f.Model.SHA256
	l := quantize.LineageOf(m)
	for i, s := range l.Inputs {
		if s == want {
			return &Acceptance{Golden: want, Artifact: l.Inputs[len(l.Inputs)-1], Rule: RuleDerived, Steps: l.Steps[i:]}, nil
		}
	}
	// Only a model qnnprep did not make needs its own fingerprint (a full
	// read); a qmodel's is its source's.
	own := l.Inputs
	var sha string
	if len(own) > 0 {
		sha = own[len(own)-1]
	} else {
		var err error
		if sha, err = quantize.Fingerprint(m); err != nil {
			return nil, fmt.Errorf("%s: fingerprint: %w", m.Path, err)
		}
		if sha == want {
			return &Acceptance{Golden: want, Artifact: sha, Rule: RuleSameModel}, nil
		}
	}
	if override != "" {
		o := strings.ToLower(strings.TrimSpace(override))
		if len(o) < 16 || !strings.HasPrefix(want, o) {
			return nil, fmt.Errorf("%w: --source-fingerprint %s is not the fingerprint of the golden's source %s (sha256 %s)",
				ErrModelMismatch, override, f.Model.Path, want)
		}
		return &Acceptance{Golden: want, Artifact: sha, Rule: RuleOverride, Override: want}, nil
	}
	from := "sha256 " + sha
	if len(l.Inputs) > 0 {
		from = fmt.Sprintf("sha256 %s (made by %s from origin %s)", sha, strings.Join(l.Steps, " → "), l.Origin())
	}
	return nil, fmt.Errorf("%w: golden %s was recorded from %s (sha256 %s); the artifact comes from %s, not derived from it "+
		"(if it was made elsewhere from the same weights, pass --source-fingerprint %s)",
		ErrModelMismatch, f.Name(), f.Model.Path, want, from, want)
}
