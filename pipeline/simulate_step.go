package pipeline

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// calibrate runs Options.Calibration for m cut by p, writes the ranges
// file to path and returns the ranges.
func (b *builder) calibrate(m *model.Model, p *shard.Plan, path string) (map[string]onnx.Range, error) {
	co := *b.o.Calibration
	co.Threads = cmpOr(co.Threads, b.o.Threads)
	if c := m.Config.ContextLength; co.Greedy > 0 && c > 0 {
		co.Greedy = min(co.Greedy, max(c-2, 1))
	}
	if co.Text != "" && co.Tokenizer == nil {
		tok, err := b.tokenizer()
		if err != nil {
			return nil, fmt.Errorf("calibration: %s: %w", co.Text, err)
		}
		co.Tokenizer = tok
	}
	cal, err := Calibrate(b.ctx, m, p, co)
	if err != nil {
		return nil, err
	}
	if err := cal.Write(path); err != nil {
		return nil, err
	}
	if m == b.qm {
		b.res.Ranges = path
	}
	return cal.Ranges, nil
}

// tokenizer is the bundle's tokenizer, to encode calibration text.
func (b *builder) tokenizer() (*tokenizer.Tokenizer, error) {
	switch {
	case b.tok == nil:
		return nil, ErrNoTokenizer
	case b.tok.Vocab != nil:
		return tokenizer.New(b.tok.Vocab)
	default:
		v, err := tokenizer.Load(b.tok.Copy, b.qm.Config.VocabSize)
		if err != nil {
			return nil, err
		}
		return tokenizer.New(v)
	}
}

// simulate decodes the verify prompts with the exported encodings
// simulated, against the qmodel's float decode (SimulateEncodings).
func (b *builder) simulate() error {
	if b.o.NoSimulate {
		s := b.res.Step(StepSimulate)
		s.Status, s.Note = StatusSkipped, "encodings not simulated (--simulate=false)"
		return nil
	}
	return b.step(StepSimulate, func(s *StepResult) error {
		if b.head != nil {
			s.Status, s.Note = StatusSkipped, "not simulated: the eaglet last stage's fc is the EAGLE-3 head's, which the simulation does not take yet"
			return nil
		}
		if b.forecast != nil {
			// The first stage's embedding table holds rows the qmodel
			// does not, so its weights are not the qmodel's.
			s.Status, s.Note = StatusSkipped, "not simulated: the ssd-q1 forecast rows make the embedding table differ from the qmodel's"
			return nil
		}
		encs, err := ReadGraphEncodings(filepath.Join(b.work, ONNXDir), b.res.Plan)
		if err != nil {
			return err
		}
		r, err := SimulateEncodings(b.ctx, b.qm, b.res.Plan, encs, SimOptions{
			Prompts: b.o.Prompts, Tokens: b.o.Tokens, Threads: b.o.Threads,
		})
		if err != nil {
			return err
		}
		b.res.Simulation = r
		sum := r.Summary
		cos := "-"
		if sum.Cosine != nil {
			cos = fmt.Sprintf("%.5f", *sum.Cosine)
		}
		s.Note = fmt.Sprintf("vs float: top-1 %.1f%%, cosine %s, exact %d/%d tokens", 100*sum.Top1, cos, sum.Matched, sum.Tokens)
		if !r.Pass {
			s.Note += "; LOSS above the thresholds: " + strings.Join(r.Failures, "; ")
		}
		return nil
	})
}
