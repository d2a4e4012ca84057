package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/sparse/study"
)

// TestSparsifyCommand runs sparsify on stories260K (channel 25%, pruned)
// and compare on its outputs.
func TestSparsifyCommand(t *testing.T) {
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	dir := t.TempDir()
	out, g := filepath.Join(dir, "ch.gguf"), filepath.Join(dir, "golden.json")
	var code int
	stdout := captureStdout(t, func() {
		code = run([]string{"sparsify", storiesGGUF, out, "--pattern", "channel", "--sparsity", "0.25", "--prune",
			"--save-golden", g, "--steps", "16", "--json", "-t", "1"})
	})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stdout)
	}
	var res study.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Sparsity.StructureSparsity != 0.25 || res.Sparsity.Sparsity != 0.25 || res.Effective != 0.25 {
		t.Errorf("sparsity %v / %v / effective %v", res.Sparsity.StructureSparsity, res.Sparsity.Sparsity, res.Effective)
	}
	p := res.Pruned
	if p == nil || p.Config.Hidden != 48 || p.SavedBytes*4 != res.WeightBytes {
		t.Fatalf("pruned %+v, variant bytes %d", p, res.WeightBytes)
	}
	if p.Quality.Top1 != res.Quality.Top1 || p.Quality.Matched != res.Quality.Matched {
		t.Errorf("pruned quality %+v, zeroed %+v", p.Quality, res.Quality)
	}
	if res.Quality.Top1 >= 1 {
		t.Errorf("25%% of the channels removed and top-1 %v", res.Quality.Top1)
	}
	pm, err := model.Open(p.Output)
	if err != nil {
		t.Fatal(err)
	}
	if pm.Config.Hidden != 48 || pm.Tensor("token_embd.weight").Dims[0] != 48 {
		t.Errorf("pruned file: hidden %d", pm.Config.Hidden)
	}
	pm.Close()

	// compare: the dense model matches its own golden; the two variants
	// agree with each other.
	stdout = captureStdout(t, func() {
		code = run([]string{"compare", storiesGGUF, out, p.Output, "--golden", g, "--json", "-t", "1"})
	})
	if code != 0 {
		t.Fatalf("compare exit %d: %s", code, stdout)
	}
	var rows []compareRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Quality.Top1 != 1 || rows[0].Quality.MatchFraction != 1 {
		t.Fatalf("rows %+v", rows)
	}
	if rows[1].Pattern != "channel" || rows[1].Zeros < 0.25 || rows[1].Quality.Top1 != rows[2].Quality.Top1 || rows[2].WeightBytes >= rows[1].WeightBytes {
		t.Errorf("variant rows %+v %+v", rows[1], rows[2])
	}
}

func TestSparsifyErrors(t *testing.T) {
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "x.gguf")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--pattern", "2:5x"}, 2},
		{[]string{"--pattern", "2:4", "--sparsity", "0.3"}, 1},
		{[]string{"--pattern", "2:4", "--prune"}, 2},
		{[]string{"--pattern", "2:4", "--select", "wanda"}, 2},
		{[]string{"--pattern", "channel"}, 1},
		{[]string{"--pattern", "block16", "--target", "nothing=0.5"}, 1},
	} {
		code := run(append([]string{"sparsify", storiesGGUF, out, "--steps", "2"}, tc.args...))
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args, code, tc.code)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: output written despite the error", tc.args)
		}
	}
}
