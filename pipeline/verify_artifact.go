package pipeline

import (
	"context"
	"fmt"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

// VerifyOptions say how VerifyArtifact decodes an artifact (qnnprep
// verify).
type VerifyOptions struct {
	Artifact string // a qmodel or any model model.Open reads
	Golden   string // the golden file, recorded from the artifact's source
	// SourceFingerprint accepts the golden for an artifact made elsewhere
	// from the golden's source (golden.File.Accept).
	SourceFingerprint string
	Thresholds        golden.Overrides
	Engine            runtime.Options // threads, context, KV rounding

	// Plan, if set, is a plan file the artifact is also decoded through.
	Plan string
	// SimulateEncodings, with Plan, is the directory export wrote the
	// plan's encodings into: the golden's prompts are also decoded with
	// them simulated, against the float decode (SimulateEncodings).
	SimulateEncodings string
	// Draft or Eagle3 (at most one) also decode speculatively, K draft
	// tokens per window: whole, and for a draft model through Plan too.
	Draft, Eagle3 string
	K             int

	// Warn, if set, receives each warning as it is found (they are also
	// in the reports).
	Warn func(string)
}

// VerifyArtifact decodes o.Artifact against the golden file: whole, then
// through the plan, speculatively and with the encodings simulated as
// asked. It returns one report per decode; every one after the first
// compares its outputs with the whole model's (they must be equal).
func VerifyArtifact(ctx context.Context, o VerifyOptions) ([]*golden.Report, error) {
	g, err := golden.Read(o.Golden)
	if err != nil {
		return nil, err
	}
	path := o.Artifact
	m, err := model.Open(path)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	acc, err := g.Accept(m, o.SourceFingerprint)
	if err != nil {
		return nil, fmt.Errorf("%s against %s: %w", path, o.Golden, err)
	}
	e, err := runtime.New(m, o.Engine)
	if err != nil {
		return nil, err
	}
	if err := g.CheckContext(e.ContextLength()); err != nil {
		return nil, err
	}
	crit := g.DefaultCriteria(m, acc).With(o.Thresholds)
	var warnings []string
	if w := golden.KVWarning(g, o.Engine.KVF16); w != "" {
		warnings = append(warnings, w)
		if o.Warn != nil {
			o.Warn(w)
		}
	}
	type decoder struct {
		name string
		d    golden.Decoder
	}
	var plan *shard.Plan
	decoders := []decoder{{"whole", golden.EngineDecoder(e)}}
	if o.Plan != "" {
		p, err := shard.ReadPlan(o.Plan)
		if err != nil {
			return nil, err
		}
		// NewStaged refuses a plan made for another model, naming what differs.
		st, err := runtime.NewStaged(e, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Plan, err)
		}
		decoders = append(decoders, decoder{"plan " + o.Plan, st})
		plan = p
	}
	if o.Draft != "" || o.Eagle3 != "" {
		ds, err := runtime.OpenDrafts(e, m, runtime.DraftSource{Model: o.Draft, Eagle3: o.Eagle3}, o.Engine)
		if err != nil {
			return nil, err
		}
		defer ds.Close()
		decoders = append(decoders, decoder{fmt.Sprintf("speculative K=%d, %s", o.K, ds.Name), golden.SpeculativeDecoder(e, ds.New, o.K)})
		if plan != nil && o.Draft != "" {
			// And through the plan (EAGLE-3 needs hidden states the
			// stage graphs do not expose).
			st, err := runtime.NewStaged(e, plan)
			if err != nil {
				return nil, err
			}
			decoders = append(decoders, decoder{fmt.Sprintf("plan %s, speculative K=%d, %s", o.Plan, o.K, ds.Name), golden.SpeculativeThrough(st, st, ds.New, o.K)})
		}
	}
	var reports []*golden.Report
	for i, dc := range decoders {
		r, err := golden.Verify(ctx, dc.d, g, crit)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", path, dc.name, err)
		}
		r.Golden, r.Artifact, r.Decoder = o.Golden, path, dc.name
		r.Source, r.Warnings = acc, warnings
		if i > 0 {
			// Staged and speculative decoding must give the whole model's tokens.
			r.CompareOutputs(reports[0])
		}
		reports = append(reports, r)
	}
	if o.SimulateEncodings != "" {
		encs, err := ReadGraphEncodings(o.SimulateEncodings, plan)
		if err != nil {
			return nil, err
		}
		r, err := SimulateEncodings(ctx, m, plan, encs, SimOptions{Prompts: g.Prompts, Tokens: g.Settings.Steps, Threads: o.Engine.Threads})
		if err != nil {
			return nil, fmt.Errorf("%s (--simulate-encodings %s): %w", path, o.SimulateEncodings, err)
		}
		r.Golden, r.Artifact = "its float decode", path
		r.Decoder = "plan " + o.Plan + ", " + r.Decoder
		reports = append(reports, r)
	}
	return reports, nil
}
