package shard

import (
	"slices"
	"testing"
)

// TestEndStageBytes: the first and last stages' bytes are what their
// graphs hold: no embedding table when an eaglet stage 0 takes
// embeddings, the EAGLE-3 head's fc in the eaglet last stage (float32
// when its size is not given), ssd-q1's forecast rows in the table; and
// Check judges those bytes, so an eaglet last stage that fits only
// without its fc fails RuleContextBytes.
func TestEndStageBytes(t *testing.T) {
	const (
		layer = 220 * mib
		head  = 250 * mib
		row   = 2112 // a 4-bit row of 4096 with 32 block scales
	)
	cfg := llamaConfig()
	embed := int64(cfg.VocabSize) * row
	fcFloat := int64(3 * 4096 * 4096 * 4)
	given := eagletHead()
	given.FCBytes = 3 * mib
	ssd := Dialog{Type: SSD, ForecastTokenCount: 4, Branches: []int{2}, ForecastPrefix: 16, ForecastPrefixName: "fp"}
	for _, tc := range []struct {
		name        string
		d           Dialog
		h           *EagletHead
		first, last int64
		over        []int // stages over the context limit
	}{
		{"plain", Dialog{}, nil, 8*layer + embed, 8*layer + head, nil},
		{"eaglet", eagletDialog, eagletHead(), 8 * layer, 8*layer + head + fcFloat, []int{3}},
		{"eaglet-fc-given", eagletDialog, given, 8 * layer, 8*layer + head + 3*mib, nil},
		{"ssd-q1", ssd, nil, 8*layer + embed + 4*row, 8*layer + head, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlan(t, cfg, uniform(32, layer), head, embed,
				Options{LayersPerStage: 8, AR: []int{128, 32}, CL: []int{4096}, Dialog: tc.d, EagletHead: tc.h})
			if got := p.Stages[0].Bytes; got != tc.first {
				t.Errorf("stage 0: %d bytes, want %d (%+d)", got, tc.first, got-tc.first)
			}
			if got := p.Stages[3].Bytes; got != tc.last {
				t.Errorf("stage 3: %d bytes, want %d (%+d)", got, tc.last, got-tc.last)
			}
			var over []int
			for _, v := range Check(p, CheckEnv{}) {
				if v.Rule == RuleContextBytes {
					for _, st := range p.Stages {
						if slices.Contains(st.Graphs, v.Graph) {
							over = append(over, st.Index)
						}
					}
				}
			}
			if !slices.Equal(over, tc.over) {
				t.Errorf("stages over the limit %v, want %v", over, tc.over)
			}
		})
	}
}
