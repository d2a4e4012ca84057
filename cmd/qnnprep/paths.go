package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/qnnprep/qnnprep/internal/outpath"
)

// checkPaths is every command's first check, before any work: it refuses
// outputs that are not regular files, that are (however spelled) one of
// the inputs or inside an input directory, output directories holding the
// user's files, and outputs whose directory cannot be written. See
// internal/outpath.
func checkPaths(inputs, files, dirs []string) error {
	return outpath.Check(outpath.Paths{Inputs: inputs, Files: files, Dirs: dirs})
}

// modelInput is what model.Open reads for path: the whole checkpoint
// directory when path names a file in it (config.json, a .safetensors
// shard, the index), else path itself.
func modelInput(path string) []string {
	st, err := os.Stat(path)
	if err != nil || st.IsDir() {
		return []string{path}
	}
	base := filepath.Base(path)
	if base == "config.json" || base == "model.safetensors.index.json" || strings.HasSuffix(base, ".safetensors") {
		return []string{path, filepath.Dir(path)}
	}
	return []string{path}
}

// ins joins input lists.
func ins(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
