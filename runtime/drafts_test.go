package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// TestOpenDraftsWantsOneSource: no drafter, or two at once, is refused
// before anything is opened.
func TestOpenDraftsWantsOneSource(t *testing.T) {
	for _, src := range []DraftSource{
		{},
		{Model: "d.gguf", Eagle3: "h.gguf"},
		{Model: "d.gguf", MTP: true},
		{Eagle3: "h.gguf", MTP: true},
	} {
		_, err := OpenDrafts(nil, nil, src, Options{})
		if err == nil || !strings.Contains(err.Error(), "exactly one drafter") {
			t.Errorf("%+v: error %v, want one naming the choice", src, err)
		}
	}
}

// TestOpenDraftsSelf: a target drafting for itself (the same file, under
// any name) is decoded by the target's own Engine, so its weights are
// mapped and held once; another file, or other decoding options, get an
// Engine of their own.
func TestOpenDraftsSelf(t *testing.T) {
	dir := t.TempDir()
	cfg := synth.Config(model.Llama, false)
	path, other, link := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "other.gguf"), filepath.Join(dir, "link.gguf")
	for _, p := range []string{path, other} {
		if err := synth.WriteGGUF(p, cfg, 3, gguf.F32); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	m, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	opt := Options{Threads: 1}
	target := newEngine(t, m, opt)
	for _, tc := range []struct {
		draft string
		opt   Options
		share bool
	}{
		{path, opt, true},
		{link, opt, true},
		{path, Options{Threads: 1, Context: 8, Batch: 32}, false}, // another context
		{path, Options{Threads: 1, KVF16: true}, false},
		{other, opt, false},
	} {
		ds, err := OpenDrafts(target, m, DraftSource{Model: tc.draft}, tc.opt)
		if err != nil {
			t.Fatalf("%s %+v: %v", tc.draft, tc.opt, err)
		}
		d, err := ds.New()
		if err != nil {
			t.Fatal(err)
		}
		if got := d.(*DraftModel).st.e == target; got != tc.share {
			t.Errorf("%s %+v: draft uses the target's Engine = %v, want %v", filepath.Base(tc.draft), tc.opt, got, tc.share)
		}
		if err := ds.Close(); err != nil {
			t.Error(err)
		}
	}
}
