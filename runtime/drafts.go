package runtime

import (
	"errors"

	"github.com/qnnprep/qnnprep/internal/outpath"
	"github.com/qnnprep/qnnprep/model"
)

// DraftSource says where speculative decoding's drafts come from: set
// exactly one of its fields.
type DraftSource struct {
	Model  string // a separate draft model sharing the target's vocabulary
	Eagle3 string // an EAGLE-3 head: GGUF (architecture eagle3) or an HF directory
	MTP    bool   // the target's own MTP block (qwen35/qwen3next GGUF)
}

// Drafts makes drafters for one target: each speculative run needs a
// fresh one.
type Drafts struct {
	// Name says what drafts: "draft PATH", "eagle3 PATH" or "mtp".
	Name  string
	make  func() (Drafter, error)
	close func() error
}

// New returns a fresh drafter.
func (d *Drafts) New() (Drafter, error) { return d.make() }

// Close releases the draft model or head.
func (d *Drafts) Close() error { return d.close() }

// OpenDrafts opens src for target, the Engine of m. A draft model runs
// with opt (threads, context, KV rounding) and is checked against the
// target here, so that a mismatch fails before anything is decoded.
func OpenDrafts(target *Engine, m *model.Model, src DraftSource, opt Options) (*Drafts, error) {
	switch {
	case src.Model != "" && src.Eagle3 == "" && !src.MTP:
		if outpath.SameFile(m.Path, src.Model) && target.runsWith(opt) {
			// The target drafting for itself: its Engine serves both, so
			// the file is mapped and held once.
			return &Drafts{
				Name:  "draft " + src.Model,
				make:  func() (Drafter, error) { return NewDraftModel(target, target) },
				close: func() error { return nil },
			}, nil
		}
		dm, err := model.Open(src.Model)
		if err != nil {
			return nil, err
		}
		de, err := New(dm, opt)
		if err == nil {
			_, err = NewDraftModel(target, de)
		}
		if err != nil {
			dm.Close()
			return nil, err
		}
		return &Drafts{
			Name:  "draft " + src.Model,
			make:  func() (Drafter, error) { return NewDraftModel(target, de) },
			close: dm.Close,
		}, nil
	case src.Eagle3 != "" && src.Model == "" && !src.MTP:
		h, err := OpenEagle3(target, src.Eagle3)
		if err != nil {
			return nil, err
		}
		return &Drafts{
			Name:  "eagle3 " + src.Eagle3,
			make:  func() (Drafter, error) { return h.Drafter(), nil },
			close: h.Close,
		}, nil
	case src.MTP && src.Model == "" && src.Eagle3 == "":
		h, err := LoadMTP(target, m)
		if err != nil {
			return nil, err
		}
		return &Drafts{
			Name:  "mtp",
			make:  func() (Drafter, error) { return h.Drafter(), nil },
			close: func() error { return nil },
		}, nil
	}
	return nil, errors.New("runtime: give exactly one drafter: a draft model, an EAGLE-3 head or MTP")
}
