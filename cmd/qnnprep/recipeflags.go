package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/qnnprep/qnnprep/quantize"
)

// addRecipeFlags adds --recipe and --override, which quantize, build and
// sparsify share, and returns the function that reads them after
// parseFlags. An empty def makes --recipe required; what starts its help.
// Bad values are usage errors.
func addRecipeFlags(fs *pflag.FlagSet, def, what string) func() (*quantize.Recipe, []quantize.Rule, error) {
	recipe := fs.String("recipe", def, what+": "+fmt.Sprint(quantize.RecipeNames()))
	overrides := fs.StringArray("override", nil, "PATTERN=TYPE quantization override, e.g. 'blk.*.ffn_down.weight=Q8_0' (TYPE: a ggml type or int8 for per-channel Q8_0); repeatable, first match wins")
	return func() (*quantize.Recipe, []quantize.Rule, error) {
		if *recipe == "" {
			return nil, nil, usageError("--recipe is required")
		}
		r, err := quantize.LookupRecipe(*recipe)
		if err != nil {
			return nil, nil, usageError("%v", err)
		}
		var rules []quantize.Rule
		for _, o := range *overrides {
			rule, err := quantize.ParseOverride(o)
			if err != nil {
				return nil, nil, usageError("%v", err)
			}
			rules = append(rules, rule)
		}
		return r, rules, nil
	}
}
