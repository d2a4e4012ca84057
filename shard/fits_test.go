package shard

import (
	"strings"
	"testing"
)

func TestFits(t *testing.T) {
	cfg := llamaConfig()
	p, err := NewPlan(cfg, Sizes{Layers: uniform(cfg.Layers, mib)}, "m", Options{CL: []int{2048}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Fits(cfg); err != nil {
		t.Fatalf("the plan's own model: %v", err)
	}
	short := cfg
	short.ContextLength = 1024
	wider := cfg
	wider.Hidden *= 2
	for _, tc := range []struct {
		name string
		edit func(c *Plan) error
		want string
	}{
		{"shorter context", func(c *Plan) error { return c.Fits(short) }, "CL 2048 above the model's context length 1024"},
		{"other hidden size", func(c *Plan) error { return c.Fits(wider) }, "hidden"},
	} {
		if err := tc.edit(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
