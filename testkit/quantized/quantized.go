// Package quantized gives tests a qmodel of an in-memory model: quantize.Run
// with a named recipe into the test's temporary directory, opened as a
// user's qmodel would be. It sits apart from testkit because it imports
// quantize, which testkit's lower users (int8, quant1bit, gguf) must not
// link.
package quantized

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

// Model writes m as a qmodel with the named recipe (one worker) and opens
// it; the model is closed when the test ends.
func Model(tb testing.TB, m *model.Model, recipe string) *model.Model {
	tb.Helper()
	r, err := quantize.LookupRecipe(recipe)
	if err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(tb.TempDir(), recipe+".gguf")
	if _, err := quantize.Run(context.Background(), m, out, quantize.Options{Recipe: r, Workers: 1}); err != nil {
		tb.Fatal(err)
	}
	q, err := model.Open(out)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { q.Close() })
	return q
}
