package peers_test

import (
	"testing"

	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/testkit"
)

func TestLlamaBenchStories260K(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	ids := goldenIDs(t)
	r, err := peers.LlamaBench(stories260K(t), peers.LlamaBenchRequest{Threads: 1, DepthIDs: ids[:32], PromptIDs: ids[32:48], Gen: 8, Reps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.PPSeconds) != 2 || len(r.TGSeconds) != 2 {
		t.Fatalf("got %d pp and %d tg timings, want 2 each", len(r.PPSeconds), len(r.TGSeconds))
	}
	// A 260K-parameter model decodes a token in well under a second.
	for _, s := range append(r.PPSeconds, r.TGSeconds...) {
		if s <= 0 || s > 10 {
			t.Errorf("timing %v s out of range", s)
		}
	}
	if r.PeakRSS <= 0 {
		t.Errorf("peak RSS %d", r.PeakRSS)
	}
	t.Logf("pp16 %.4f s, tg8 %.4f s, rss %d", r.PPSeconds[0], r.TGSeconds[0], r.PeakRSS)

	// tg alone, depth 0.
	if _, err := peers.LlamaBench(stories260K(t), peers.LlamaBenchRequest{Gen: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := peers.LlamaBench(stories260K(t), peers.LlamaBenchRequest{}); err == nil {
		t.Error("nothing to time: no error")
	}
}
