// Package peers finds and calls the reference implementations that qnnprep
// is checked against in tests and CI (reference/peers.md): llama.cpp through
// node-llama-cpp, @huggingface/gguf, @huggingface/tokenizers and
// onnxruntime-node from npm, and
// Debian's python3-onnx; and llama.cpp's own llama-bench, built by
// llama-bench.sh from the source node-llama-cpp ships.
//
// Each call runs one of the committed helper scripts beside this file (js/,
// python/) with node or /usr/bin/python3 and reads a JSON reply from its
// stdout. The npm packages live in a node_modules directory: the one named
// by QNNPREP_PEERS_DIR, or <repo>/.peers/node_modules, which .ci/run
// installs from js/package-lock.json.
package peers

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Peer names for Check (and testkit.Need).
const (
	NodeLlamaCpp    = "node-llama-cpp"
	HFGGUF          = "@huggingface/gguf"
	ONNXRuntimeNode = "onnxruntime-node"
	// HFTokenizers is Tokenizers.js, an independent reader of Hugging
	// Face's tokenizer.json.
	HFTokenizers = "@huggingface/tokenizers"
	PythonONNX   = "python3-onnx"
	// LlamaBenchBin is llama.cpp's llama-bench tool (LlamaBenchPath).
	LlamaBenchBin = "llama-bench"
	// LlamaSource is llama.cpp's source tree (LlamaSourceDir), whose
	// models/ holds the tokenizer test vocabularies.
	LlamaSource = "llama.cpp source"
)

// Versions pinned in js/package.json; a different version is treated as
// missing, because the expected results were measured with these.
var pinned = map[string]string{
	NodeLlamaCpp:    "3.21.1",
	HFGGUF:          "0.4.6",
	ONNXRuntimeNode: "1.30.0",
	HFTokenizers:    "0.2.0",
}

// Python is the interpreter with Debian's python3-onnx. A pyenv python3
// earlier on PATH has neither numpy nor the Debian packages.
const Python = "/usr/bin/python3"

// EnvDir names the node_modules directory (or the directory holding it).
const EnvDir = "QNNPREP_PEERS_DIR"

// EnvRequire, when "1", turns a missing peer into a test failure (CI);
// testkit.Need reads it.
const EnvRequire = "QNNPREP_REQUIRE_PEERS"

// srcDir is the directory of this file, where js/ and python/ are.
func srcDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("peers: cannot locate the helper scripts (built with -trimpath?)")
	}
	return filepath.Dir(file), nil
}

// NodeModules returns the node_modules directory the npm peers are read
// from. It does not check that anything is installed there.
func NodeModules() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		d, err := filepath.Abs(d)
		if err != nil {
			return "", fmt.Errorf("peers: %s: %w", EnvDir, err)
		}
		if filepath.Base(d) != "node_modules" {
			if st, err := os.Stat(filepath.Join(d, "node_modules")); err == nil && st.IsDir() {
				d = filepath.Join(d, "node_modules")
			}
		}
		return d, nil
	}
	src, err := srcDir()
	if err != nil {
		return "", err
	}
	// src is <repo>/internal/peers.
	return filepath.Join(src, "..", "..", ".peers", "node_modules"), nil
}

var (
	checkMu    sync.Mutex
	checkCache = map[string]error{}
)

// Check reports, for each named peer (all of them when none is named),
// whether it is installed and usable; the first missing one gives the error.
func Check(what ...string) error {
	if len(what) == 0 {
		what = []string{NodeLlamaCpp, HFGGUF, ONNXRuntimeNode, HFTokenizers, PythonONNX, LlamaBenchBin, LlamaSource}
	}
	for _, w := range what {
		key := w + "\x00" + os.Getenv(EnvDir) + "\x00" + os.Getenv(EnvLlamaBench)
		checkMu.Lock()
		err, ok := checkCache[key]
		if !ok {
			err = check(w)
			checkCache[key] = err
		}
		checkMu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func check(what string) error {
	switch what {
	case PythonONNX:
		if _, err := os.Stat(Python); err != nil {
			return fmt.Errorf("peer %s not installed: %s missing", what, Python)
		}
		out, err := exec.Command(Python, "-c", "import onnx, onnx.checker; print(onnx.__version__)").CombinedOutput()
		if err != nil {
			return fmt.Errorf("peer %s not installed: %s cannot import onnx (%s)", what, Python, lastLine(out))
		}
		return nil
	case LlamaBenchBin:
		return checkLlamaBench()
	case LlamaSource:
		return checkLlamaSource()
	case NodeLlamaCpp, HFGGUF, ONNXRuntimeNode, HFTokenizers:
	default:
		return fmt.Errorf("peers: unknown peer %q", what)
	}
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("peer %s not installed: no node on PATH", what)
	}
	nm, err := NodeModules()
	if err != nil {
		return err
	}
	var meta struct{ Version string }
	b, err := os.ReadFile(filepath.Join(nm, what, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	if err != nil {
		return fmt.Errorf("peer %s not installed in %s", what, nm)
	}
	if meta.Version != pinned[what] {
		return fmt.Errorf("peer %s is version %s in %s, want %s", what, meta.Version, nm, pinned[what])
	}
	var extra string
	switch what {
	case NodeLlamaCpp:
		extra = filepath.Join(nm, "@node-llama-cpp", "linux-x64", "bins", "linux-x64", "llama-addon.node")
	case ONNXRuntimeNode:
		extra = filepath.Join(nm, ortRelPath)
	}
	if extra != "" {
		if _, err := os.Stat(extra); err != nil {
			return fmt.Errorf("peer %s incomplete: %s missing", what, extra)
		}
	}
	return nil
}

// lastLine is the last line of b: a Python traceback ends with its message.
func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// LlamaSourceDir returns llama.cpp's source tree, extracted by llama-src.sh
// from the git bundle node-llama-cpp ships: llama.cpp beside the
// node_modules directory (NodeModules). It does not check that it exists.
func LlamaSourceDir() (string, error) {
	nm, err := NodeModules()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(nm), "llama.cpp"), nil
}

// llamaSourceStamp is the file llama-src.sh writes last, naming the commit.
const llamaSourceStamp = ".qnnprep-commit"

func checkLlamaSource() error {
	dir, err := LlamaSourceDir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, llamaSourceStamp)); err != nil {
		return fmt.Errorf("peer %s not installed: %s missing (bash internal/peers/llama-src.sh extracts it)", LlamaSource, dir)
	}
	return nil
}
