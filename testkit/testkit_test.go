package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/internal/peers"
)

// recorder is a testing.TB that records Skip and Fatal and ends the
// goroutine, as testing does, instead of ending the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skip(args ...any)                  { r.skipped = fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.failed = fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }

// record runs f on a recorder in a goroutine of its own.
func record(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// A missing peer skips with a one-line reason naming the peer and the fix,
// or fails when QNNPREP_REQUIRE_PEERS=1.
func TestNeedSkipsOrFails(t *testing.T) {
	t.Setenv(peers.EnvDir, t.TempDir())
	for _, require := range []string{"", "1"} {
		t.Setenv(peers.EnvRequire, require)
		r := record(t, func(tb testing.TB) { Need(tb, peers.NodeLlamaCpp) })
		msg := r.skipped
		if require == "1" {
			msg = r.failed
		}
		if msg == "" || (r.skipped != "") == (r.failed != "") {
			t.Errorf("%s=%q: skipped %q, failed %q", peers.EnvRequire, require, r.skipped, r.failed)
		}
		if !strings.HasPrefix(msg, "peer node-llama-cpp not installed") || !strings.HasSuffix(msg, "run .ci/run or see README") || strings.Contains(msg, "\n") {
			t.Errorf("reason %q: want one line naming the peer and the fix", msg)
		}
	}
}

// The committed fixtures are found from any package directory; a missing
// one fails instead of skipping.
func TestPath(t *testing.T) {
	p := Stories(t, "hf/config.json")
	require.True(t, filepath.IsAbs(p), p)
	_, err := os.Stat(p)
	require.NoError(t, err)

	r := record(t, func(tb testing.TB) { Path(tb, "no-such-fixture") })
	assert.Empty(t, r.skipped)
	assert.Contains(t, r.failed, "fixture missing")
}

// Without llama.cpp's source the vocabularies skip (a missing peer); with
// it, a file that is not there fails (a missing fixture).
func TestLlamaModel(t *testing.T) {
	nm := filepath.Join(t.TempDir(), "node_modules")
	require.NoError(t, os.Mkdir(nm, 0o755))
	t.Setenv(peers.EnvDir, nm)
	t.Setenv(peers.EnvRequire, "")

	r := record(t, func(tb testing.TB) { Vocab(tb, "llama-spm") })
	assert.Contains(t, r.skipped, "llama-src.sh")
	assert.Empty(t, r.failed)

	// Another directory: Check caches its answer for each peers directory.
	nm = filepath.Join(t.TempDir(), "node_modules")
	require.NoError(t, os.Mkdir(nm, 0o755))
	t.Setenv(peers.EnvDir, nm)
	src := filepath.Join(filepath.Dir(nm), "llama.cpp")
	require.NoError(t, os.MkdirAll(filepath.Join(src, "models"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, ".qnnprep-commit"), []byte("x\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "models", "ggml-vocab-a.gguf"), nil, 0o644))
	var got string
	r = record(t, func(tb testing.TB) { got = Vocab(tb, "a") })
	assert.Equal(t, filepath.Join(src, "models", "ggml-vocab-a.gguf"), got)
	assert.Empty(t, r.skipped+r.failed)
	r = record(t, func(tb testing.TB) { Vocab(tb, "b") })
	assert.Empty(t, r.skipped)
	assert.Contains(t, r.failed, "fixture missing")
}
