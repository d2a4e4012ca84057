package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/onnx"
)

// TestExportInterrupted sends SIGINT while 'export onnx' is inside a tensor
// of its external data file and requires the process to exit 130 within a
// second, say "interrupted", and leave no temporary file and nothing
// partial under a final name.
func TestExportInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 300 MB model")
	}
	dir := t.TempDir()
	src := writeBigLlama(t, dir, 2)
	q := filepath.Join(dir, "int8.gguf")
	plan := filepath.Join(dir, "plan.json")
	for _, args := range [][]string{
		{"quantize", src, q, "--recipe", "int8"},
		{"plan", q, "--stages", "1", "--ar", "32,1", "--cl", "128", "-o", plan},
	} {
		if code := run(args); code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
	}

	out := filepath.Join(dir, "onnx")
	// Interrupted once a temporary data file has bytes in it: the export
	// is writing tensors.
	r := interruptWhen(t, []string{"export", "onnx", plan, q, out, "-q", "--external"}, func() bool { return findTemp(out, ".data") })
	r.check(t, "export")
	// Only complete graphs may remain: each .onnx parses and has its
	// encodings, each data file is referenced by such a model.
	ents, _ := os.ReadDir(out)
	referenced := map[string]bool{}
	for _, e := range ents {
		if name := e.Name(); strings.HasSuffix(name, ".onnx") {
			data, err := onnx.ExternalData(filepath.Join(out, name))
			if err != nil {
				t.Errorf("interrupted export left a bad %s: %v", name, err)
			}
			for _, d := range data {
				referenced[filepath.Base(d)] = true
			}
			base := strings.TrimSuffix(name, ".onnx")
			if _, err := os.Stat(filepath.Join(out, base+".encodings.json")); err != nil {
				t.Errorf("interrupted export left %s without its encodings", name)
			}
		}
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case name == atomicfile.MarkerName, strings.HasSuffix(name, ".onnx"):
		case strings.HasSuffix(name, ".data"):
			if !referenced[name] {
				t.Errorf("interrupted export left %s, which no model references", name)
			}
		case strings.HasSuffix(name, ".encodings.json"):
			if _, err := os.Stat(filepath.Join(out, strings.TrimSuffix(name, ".encodings.json")+".onnx")); err != nil {
				t.Errorf("interrupted export left %s without its model", name)
			}
		default:
			t.Errorf("interrupted export left %s", name)
		}
	}
}
