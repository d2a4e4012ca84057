package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/shard"
)

// TestDemoFlags: --stages, -n and --soc reach every build of the demo, and
// -v prints each build's summary (TestDemoUserModel checks it is absent
// without -v).
func TestDemoFlags(t *testing.T) {
	needStories(t)
	hf := filepath.Join(filepath.Dir(storiesGGUF), "hf")
	dir := filepath.Join(t.TempDir(), "demo")
	var code int
	stdout := captureStdout(t, func() {
		captureStderr(t, func() {
			// The HF conversion has no tokenizer.json; tok512.bin is its vocabulary.
			tok := filepath.Join(filepath.Dir(storiesGGUF), "tok512.bin")
			code = run([]string{"demo", "--model", hf, "--tokenizer", tok, "--keep", dir, "--stages", "3", "-n", "5", "--soc", "sm8850", "-v"})
		})
	})
	// Exit 1: q1 of stories260K (not trained for 1-bit weights) fails its
	// default thresholds (TestDemoUserModel); every build still ran.
	if code != 1 || !strings.Contains(stdout, "result: FAIL") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	if n := strings.Count(stdout, "step      status"); n != 2 {
		t.Errorf("-v: %d build summaries, want 2:\n%s", n, stdout)
	}
	builds, _ := filepath.Glob(filepath.Join(dir, "hf-*"))
	if len(builds) != 2 {
		t.Fatalf("builds %v", builds)
	}
	for _, b := range builds {
		p, err := shard.ReadPlan(filepath.Join(b, "work", "plan.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Stages) != 3 {
			t.Errorf("%s: %d stages, want --stages 3", b, len(p.Stages))
		}
		g, err := golden.Read(filepath.Join(b, "work", pipeline.GoldenName))
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Prompts[0].Expected) != 5 {
			t.Errorf("%s: verify decoded %d tokens, want -n 5", b, len(g.Prompts[0].Expected))
		}
		ext, _ := os.ReadFile(filepath.Join(b, "bundle", qnnpack.HTPExtConfigName))
		if !strings.Contains(string(ext), `"soc_model": 87`) {
			t.Errorf("%s: HTP config not for sm8850:\n%s", b, ext)
		}
	}
}
