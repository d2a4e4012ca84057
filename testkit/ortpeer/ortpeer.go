//go:build cgo

// Package ortpeer loads ONNX Runtime, the onnxruntime-node peer's shared
// library (through cgo, github.com/yalue/onnxruntime_go), for the tests
// that run exported graphs.
package ortpeer

import (
	"sync"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/testkit"
)

var (
	once sync.Once
	err  error
)

// Need skips tb without the onnxruntime-node peer (testkit.Need) and
// otherwise initializes ONNX Runtime once per test binary.
func Need(tb testing.TB) {
	tb.Helper()
	testkit.Need(tb, peers.ONNXRuntimeNode)
	lib, libErr := peers.ORTLibrary()
	if libErr != nil {
		tb.Fatal(libErr)
	}
	once.Do(func() {
		ort.SetSharedLibraryPath(lib)
		err = ort.InitializeEnvironment()
	})
	if err != nil {
		tb.Fatalf("onnxruntime %s: %v", lib, err)
	}
}
