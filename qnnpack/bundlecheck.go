package qnnpack

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qnnprep/qnnprep/shard"
)

// genieFileKeys are the genie_config.json keys whose string values (or
// lists of them) name bundle files (qnn-genie.md §1.1). forecast-prefix-name
// names a directory that holds ForecastPrefixFile.
var genieFileKeys = []string{"path", "extensions", "ctx-bins", "lut-path", "draft-token-map", "forecast-prefix-name"}

// contentProblems checks what the bundle's own files say it holds: the
// configs and plan the manifest must list, every file genie_config.json
// and htp_backend_ext_config.json name, and a context binary for every
// stage of the plan. listed holds the manifest's paths; context binaries
// are not asked for in a dry-run bundle, which has none by design.
func contentProblems(dir string, m *Manifest, listed map[string]bool) []string {
	var problems []string
	need := func(name, why string) bool {
		if !listed[name] {
			problems = append(problems, fmt.Sprintf("%s: %s, but the manifest does not list it", name, why))
			return false
		}
		return true
	}
	if need(GenieConfigName, "every bundle has one") {
		names, err := namedFiles(dir, GenieConfigName, func(key string) bool { return slices.Contains(genieFileKeys, key) })
		if err != nil {
			problems = append(problems, err.Error())
		}
		for _, n := range names {
			if m.DryRun && n.key == "ctx-bins" {
				continue
			}
			problems = append(problems, n.check(listed)...)
		}
	}
	if need(HTPExtConfigName, "genie_config.json's backend extensions") {
		names, err := namedFiles(dir, HTPExtConfigName, func(key string) bool {
			return strings.HasSuffix(key, "path") || strings.HasSuffix(key, "_file")
		})
		if err != nil {
			problems = append(problems, err.Error())
		}
		for _, n := range names {
			problems = append(problems, n.check(listed)...)
		}
	}
	if m.Plan == "" {
		return append(problems, "the manifest names no plan")
	}
	if !need(m.Plan, "the manifest's plan") {
		return problems
	}
	p, err := shard.ReadPlan(filepath.Join(dir, filepath.FromSlash(m.Plan)))
	if err != nil {
		return append(problems, fmt.Sprintf("%s: %v", m.Plan, err))
	}
	if !m.DryRun {
		for i := range p.Stages {
			if bin := ContextBinaryName(p, i) + ".bin"; !listed[bin] {
				problems = append(problems, fmt.Sprintf("stage %d of %s: its context binary %s is not in the manifest", i+1, m.Plan, bin))
			}
		}
	}
	if len(m.Stages) != len(p.Stages) {
		problems = append(problems, fmt.Sprintf("the manifest describes %d stages, %s has %d", len(m.Stages), m.Plan, len(p.Stages)))
	}
	return problems
}

// namedFile is a bundle path a config names under key.
type namedFile struct {
	config, key, path string
}

func (n namedFile) check(listed map[string]bool) []string {
	p := n.path
	if n.key == "forecast-prefix-name" {
		p = path.Join(p, ForecastPrefixFile)
	}
	if !filepath.IsLocal(filepath.FromSlash(p)) {
		return []string{fmt.Sprintf("%s: %s %q is not a path inside the bundle", n.config, n.key, n.path)}
	}
	if p = path.Clean(filepath.ToSlash(p)); !listed[p] {
		return []string{fmt.Sprintf("%s names %s (%s), which is not in the bundle", n.config, p, n.key)}
	}
	return nil
}

// namedFiles reads the JSON file name in dir and returns every string (or
// string in a list) under a key that isFile accepts, at any depth.
func namedFiles(dir, name string, isFile func(key string) bool) ([]namedFile, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var out []namedFile
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(k, x[k])
			}
		case []any:
			for _, e := range x {
				walk(key, e)
			}
		case string:
			if isFile(key) {
				out = append(out, namedFile{name, key, x})
			}
		}
	}
	walk("", v)
	return out, nil
}
