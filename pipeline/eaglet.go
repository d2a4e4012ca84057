package pipeline

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

// The eaglet dialog with an EAGLE-3 head (Options.Eagle3; shard/EAGLET.md):
// the plan gets the head's draft graphs and the taps, export writes the
// target (fc in its last stage) and the draft graphs, the draft engine is
// compiled like an spd draft, and the bundle holds the embedding LUT and
// the draft-token-map. Verify decodes the dialog through the plan.

// openEagle3 opens the head for engine e (the qmodel's).
func (b *builder) openEagle3(e *runtime.Engine) (*runtime.Eagle3, error) {
	h, err := runtime.OpenEagle3(e, b.o.Eagle3)
	if err != nil {
		return nil, fmt.Errorf("EAGLE-3 head %s: %w", b.o.Eagle3, err)
	}
	return h, nil
}

// eagletHead opens the head against the qmodel and returns its shape for
// the plan, with its fc's device bytes in container c.
func (b *builder) eagletHead(c shard.Container) (*shard.EagletHead, error) {
	e, err := runtime.New(b.qm, runtime.Options{Threads: b.o.Threads})
	if err != nil {
		return nil, err
	}
	h, err := b.openEagle3(e)
	if err != nil {
		return nil, err
	}
	b.head = h
	eh := h.EagletHead()
	for _, t := range h.Tensors() {
		if t.Name == "fc.weight" {
			if eh.FCBytes, err = shard.DeviceBytes(t, c); err != nil {
				return nil, fmt.Errorf("EAGLE-3 head %s: %w", b.o.Eagle3, err)
			}
		}
	}
	if eh.FCBytes == 0 {
		return nil, fmt.Errorf("EAGLE-3 head %s has no fc.weight", b.o.Eagle3)
	}
	return &eh, nil
}

// onnxHead is the head as the exporter takes it.
func (b *builder) onnxHead() *onnx.Eagle3Head {
	c := b.head.Config()
	return &onnx.Eagle3Head{Tensors: b.head.Tensors(), RMSEps: c.RMSEps, NormBeforeResidual: c.NormBeforeResidual, RopeNeox: c.RopeNeox}
}

// buildEagletDraft exports the draft graphs into work/draft/onnx and
// compiles them as the draft engine (or lists the commands).
func (b *builder) buildEagletDraft(s *StepResult) error {
	p := b.res.Plan
	dp, err := p.DraftEngine()
	if err != nil {
		return err
	}
	dir := filepath.Join(b.work, DraftDir)
	onnxDir := filepath.Join(dir, ONNXDir)
	if err := os.MkdirAll(onnxDir, 0o755); err != nil {
		return err
	}
	opts := b.o.Export
	opts.Eagle3 = b.onnxHead()
	if _, err := onnx.ExportDraft(b.ctx, p, onnxDir, opts, nil); err != nil {
		return err
	}
	ppath := filepath.Join(dir, PlanName)
	if err := shard.WritePlan(ppath, dp); err != nil {
		return err
	}
	files, err := qnnpack.FindGraphFiles(dp, onnxDir)
	if err != nil {
		return err
	}
	hc := b.head.Config()
	// Genie's draft engine: the head's own RoPE theta, the target's
	// special tokens.
	cfg := model.Config{BOS: b.qm.Config.BOS, EOS: b.qm.Config.EOS, RopeTheta: float64(hc.RopeTheta)}
	dm := &qnnpack.DraftModel{Plan: dp, Config: cfg, TokenMap: b.head.DraftTokenMap()}
	s.Outputs = []string{b.rel(dir) + "/"}
	s.Note = fmt.Sprintf("EAGLE-3 head: %d draft graphs, draft vocabulary %d, taps %v", len(dp.Graphs), hc.DraftVocab, hc.ExtractLayers)
	// The eaglet rules checked the draft graphs; as a plan of its own the
	// draft (embeddings in, basic dialog) is not a Genie model alone.
	return b.compileDraft(s, dir, dm, files, true, false)
}

// eagletLUT is the bundle's embedding LUT: the qmodel's token embedding
// rows as float32, the rows the staged runtime feeds the first stage.
func (b *builder) eagletLUT() (*qnnpack.EagletLUT, error) {
	t := b.qm.Tensor("token_embd.weight")
	if t == nil || len(t.Dims) != 2 {
		return nil, fmt.Errorf("%s: no token_embd.weight matrix for the eaglet embedding LUT", b.res.QModel)
	}
	cols, rows := int(t.Dims[0]), int(t.Dims[1])
	rb, err := t.Type.RowBytes(t.Dims[0])
	if err != nil {
		return nil, err
	}
	return &qnnpack.EagletLUT{Rows: rows, Size: cols, Write: func(w io.Writer) error {
		data, err := t.Data()
		if err != nil {
			return err
		}
		row := make([]float32, cols)
		out := make([]byte, 4*cols)
		for r := range rows {
			if err := gguf.Dequantize(t.Type, data[int64(r)*rb:int64(r+1)*rb], row); err != nil {
				return fmt.Errorf("token_embd.weight row %d: %w", r, err)
			}
			for i, v := range row {
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
			}
			if _, err := w.Write(out); err != nil {
				return err
			}
		}
		return nil
	}}, nil
}

// eagletStaged is the staged executor with the head's fc in the last
// stage, the head opened for e.
func (b *builder) eagletStaged(e *runtime.Engine, p *shard.Plan) (*runtime.Staged, *runtime.Eagle3, error) {
	st, err := runtime.NewStaged(e, p)
	if err != nil {
		return nil, nil, err
	}
	h, err := b.openEagle3(e)
	if err != nil {
		return nil, nil, err
	}
	if err := st.SetEagle3(h); err != nil {
		return nil, nil, err
	}
	return st, h, nil
}

// verifyEaglet decodes the golden's prompts with the eaglet dialog through
// the plan's target and draft graphs (runtime.Staged.SpeculateEaglet); its
// tokens must be the whole model's.
func (b *builder) verifyEaglet(v *Verification, e *runtime.Engine, tf golden.Decoder, f *golden.File) (string, error) {
	st, h, err := b.eagletStaged(e, b.res.Plan)
	if err != nil {
		return "", fmt.Errorf("eaglet: %w", err)
	}
	d := &b.res.Plan.Dialog
	sd := golden.SpeculativeThrough(runtime.EagletSpeculator{Staged: st, Head: h}, tf, func() (runtime.Drafter, error) { return nil, nil }, d.DraftLen)
	note, err := b.verifyThroughPlan(v, sd, f, "eaglet")
	if err != nil {
		return "", err
	}
	if sr := v.Speculative.Speculative; sr != nil {
		note += fmt.Sprintf(" (%.2f drafts accepted per target call, draft-len %d, %.2f target calls per token)", sr.AcceptanceLength, d.DraftLen, sr.TargetCallsPerToken)
	}
	return note, nil
}
