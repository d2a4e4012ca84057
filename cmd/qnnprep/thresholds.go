package main

import (
	"github.com/spf13/pflag"

	"github.com/qnnprep/qnnprep/golden"
)

// addThresholdFlags adds verify's and build's threshold flags. Each one
// given replaces that default (golden.DefaultCriteria) and the report says
// so; the returned function checks the values and returns the overrides.
func addThresholdFlags(fs *pflag.FlagSet, prefix string) func() (golden.Overrides, error) {
	minMatch := fs.Float64("min-match", 0, prefix+"fail when a prompt's exact-match fraction is below F (1: every token; default per recipe, see README)")
	minTop1 := fs.Float64("min-top1", 0, prefix+"fail when a prompt's teacher-forced top-1 agreement is below F (default per recipe)")
	minCos := fs.Float64("min-cosine", 0, prefix+"fail when a prompt's mean logit cosine over the golden's top-k is below F (default per recipe)")
	failDegen := fs.Bool("fail-on-degeneration", true, prefix+"fail when an output collapses into a repeated token or short cycle the golden does not have (=false to only report it)")
	return func() (golden.Overrides, error) {
		var o golden.Overrides
		for _, f := range []struct {
			name string
			v    *float64
			dst  **float64
		}{{"min-match", minMatch, &o.MinMatch}, {"min-top1", minTop1, &o.MinTop1}, {"min-cosine", minCos, &o.MinCosine}} {
			if !fs.Changed(f.name) {
				continue
			}
			if !(*f.v >= 0 && *f.v <= 1) {
				return o, usageError("--%s %v: want a fraction in [0, 1]", f.name, *f.v)
			}
			*f.dst = f.v
		}
		if fs.Changed("fail-on-degeneration") {
			o.FailOnDegeneration = failDegen
		}
		return o, nil
	}
}
