// Package testkit is what tests share to reach their inputs: the fixtures
// committed in the repository's testdata/ (stories260K, ggml's quantizer
// goldens), the llama.cpp tokenizer vocabularies that come with the peers
// .ci/run installs, and the rule for a missing peer.
//
// One rule holds everywhere: a missing peer skips the test with a one-line
// reason (or fails it when QNNPREP_REQUIRE_PEERS=1, as in CI), while a
// missing fixture fails it, because a clone of the repository has every
// fixture. The package imports testing, so the qnnprep binary must never
// link it (cmd/qnnprep's TestNoTestKitsInBinary checks).
package testkit

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/qnnprep/qnnprep/internal/peers"
)

// Need skips the test when a named peer (every peer when none is named) is
// missing, or fails it when QNNPREP_REQUIRE_PEERS=1, as in CI.
func Need(tb testing.TB, what ...string) {
	tb.Helper()
	err := peers.Check(what...)
	if err == nil {
		return
	}
	msg := err.Error() + ": run .ci/run or see README"
	if os.Getenv(peers.EnvRequire) == "1" {
		tb.Fatal(msg)
		return
	}
	tb.Skip(msg)
}

var root struct {
	once sync.Once
	dir  string
	err  error
}

// rootDir finds the repository's root: the nearest directory above the
// working directory (a package directory, under go test) with a go.mod.
func rootDir() (string, error) {
	root.once.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			root.err = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				root.dir = dir
				return
			}
			up := filepath.Dir(dir)
			if up == dir {
				root.err = fmt.Errorf("testkit: no go.mod above the working directory")
				return
			}
			dir = up
		}
	})
	return root.dir, root.err
}

// File returns testdata/rel under the repository's root without checking
// it, for package-level variables; tests that use it must fail on a
// missing file (Path does both).
func File(rel string) string {
	dir, err := rootDir()
	if err != nil {
		dir = "." // the first open of the file reports the missing fixture
	}
	return filepath.Join(dir, "testdata", filepath.FromSlash(rel))
}

// Path returns testdata/rel under the repository's root, failing the test
// when it is missing.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	if _, err := rootDir(); err != nil {
		tb.Fatal(err)
	}
	p := File(rel)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("fixture missing: %v", err)
	}
	return p
}

// Read returns the bytes of testdata/rel, failing the test when it is
// missing.
func Read(tb testing.TB, rel string) []byte {
	tb.Helper()
	b, err := os.ReadFile(Path(tb, rel))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Float32s returns testdata/rel read as little-endian float32 values, as
// ggml-quant-golden's input_f32.bin and *.dequant_f32.bin hold them.
func Float32s(tb testing.TB, rel string) []float32 {
	tb.Helper()
	b := Read(tb, rel)
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// ReadTree returns every file under dir, by slash path relative to dir,
// with its contents: what a test compares between two output trees.
func ReadTree(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// Stories returns stories260K/name in testdata (name "" is the directory).
func Stories(tb testing.TB, name string) string {
	tb.Helper()
	return Path(tb, "stories260K/"+name)
}

// LlamaModel returns models/name (for example "ggml-vocab-qwen2.gguf" or its
// ".inp") in llama.cpp's source as node-llama-cpp ships it. It skips when
// that source is not installed (a peer) and fails when the file is not in
// it.
func LlamaModel(tb testing.TB, name string) string {
	tb.Helper()
	Need(tb, peers.LlamaSource)
	dir, err := peers.LlamaSourceDir()
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(dir, "models", name)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("fixture missing from llama.cpp's source: %v", err)
	}
	return p
}

// Vocab returns llama.cpp's tokenizer test vocabulary ggml-vocab-name.gguf
// (see LlamaModel); its tests are the same path plus ".inp" and ".out".
func Vocab(tb testing.TB, name string) string {
	tb.Helper()
	return LlamaModel(tb, "ggml-vocab-"+name+".gguf")
}

// Vocabs returns every ggml-vocab-*.gguf in llama.cpp's source, sorted.
func Vocabs(tb testing.TB) []string {
	tb.Helper()
	dir := filepath.Dir(LlamaModel(tb, "ggml-vocab-llama-spm.gguf"))
	files, err := filepath.Glob(filepath.Join(dir, "ggml-vocab-*.gguf"))
	if err != nil {
		tb.Fatal(err)
	}
	sort.Strings(files)
	return files
}
