package bench

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
)

// env700M enables the tests and benchmarks on the 706.8M-parameter
// synthetic llama (peers.md §3's body): files of 0.1–1.4 GB, minutes of CPU.
const env700M = "QNNPREP_BENCH_700M"

// envCache names the directory the large synthetic models are written to
// once and reused from (default: $TMPDIR/qnnprep-bench).
const envCache = "QNNPREP_BENCH_CACHE"

// config700M is the TinyLlama-1.1B body with a 512-token vocabulary that
// peers.md §3 measured llama-bench on, with room for depth 2048 plus a
// 512-token prompt and 128 generated tokens.
func config700M() model.Config {
	c := synth.Config(model.Llama, true)
	c.Hidden, c.Layers, c.FFN, c.Heads, c.KVHeads, c.HeadDim = 2048, 16, 5632, 32, 4, 64
	c.RopeDim = c.HeadDim
	c.ContextLength = 4096
	c.LayerKinds = make([]model.LayerKind, c.Layers)
	return c
}

// need700M skips unless env700M is set.
func need700M(tb testing.TB) {
	if os.Getenv(env700M) == "" {
		tb.Skipf("set %s=1 to run on the 700M synthetic llama", env700M)
	}
}

func cacheDir(tb testing.TB) string {
	dir := os.Getenv(envCache)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "qnnprep-bench")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// cached700M returns the synthetic 700M llama with matrices in typ,
// writing it into the cache directory the first time (synth.WriteGGUF
// is deterministic, so a cached file is the file a fresh run would write).
func cached700M(tb testing.TB, typ gguf.Type) string {
	need700M(tb)
	path := filepath.Join(cacheDir(tb), fmt.Sprintf("llama700m-%s.gguf", typ))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	tb.Logf("writing %s (once)", path)
	if err := synth.WriteGGUF(path, config700M(), 1, typ); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TestWrite700M writes the cached 700M models (Q1_0, Q8_0, F16, BF16) so
// later benchmark runs and `qnnprep bench` can use them. BF16 is the type
// users' source checkpoints come in, which `verify` and `golden record`
// decode.
func TestWrite700M(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q8_0, gguf.F16, gguf.BF16} {
		p := cached700M(t, typ)
		m, err := model.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Config.Hidden; got != 2048 {
			t.Errorf("%s: hidden %d, want 2048", p, got)
		}
		m.Close()
	}
}

// TestBench700M runs Run on the 700M llama in F16, Q8_0 and Q1_0 at
// depths 0 and 2048 (short tests: pp32, tg8, one repetition; expect
// tens of minutes on a loaded 2-core machine) and checks that every
// result is there and sane, that the JSON validates and that the plot
// renders.
func TestBench700M(t *testing.T) {
	need700M(t)
	var reps []*Report
	for _, typ := range []gguf.Type{gguf.F16, gguf.Q8_0, gguf.Q1_0} {
		p := cached700M(t, typ)
		r, err := Run(context.Background(), p, Options{Prompt: 32, Gen: 8, Depths: []int{0, 2048}, Reps: 1, Threads: []int{2}, RefThreads: 2})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, x := range r.Results {
			got[fmt.Sprintf("%s@%d", x.Test, x.Depth)] = true
			if x.Sane == nil || !*x.Sane || x.TokensPerSec <= 0 {
				t.Errorf("%s %s depth %d: %.2f tokens/s, sane %v (%s)", typ, x.Test, x.Depth, x.TokensPerSec, x.Sane, x.SanityNote)
			}
		}
		for _, k := range []string{"pp32@0", "tg8@0", "pp32@2048", "tg8@2048"} {
			if !got[k] {
				t.Errorf("%s: no %s", typ, k)
			}
		}
		reps = append(reps, r)
	}
	s := NewSuite(reps, nil)
	if err := validate(t, compileSchema(t), suiteJSON(t, s)); err != nil {
		t.Fatal(err)
	}
	var tb bytes.Buffer
	s.WriteTable(&tb)
	t.Logf("\n%s", tb.String())
	var img bytes.Buffer
	if err := Plot(&img, "png", s); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&img); err != nil {
		t.Fatal(err)
	}
}
