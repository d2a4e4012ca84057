package runtime

import (
	"strings"
	"testing"
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
