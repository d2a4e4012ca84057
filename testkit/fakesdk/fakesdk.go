// Package fakesdk lays out qnnpack's fake QAIRT SDK (qnnpack/testdata/fakesdk,
// a tool that checks every argument and input file) for the tests of the
// packages that run SDK jobs. It sits apart from testkit because it imports
// qnnpack, which testkit's lower users must not link.
package fakesdk

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/testkit"
)

// Root builds the fake tools into a new Linux x86-64 SDK layout (converter,
// context-binary generator, HTP libraries) and returns its root.
func Root(tb testing.TB) string {
	tb.Helper()
	root := filepath.Join(tb.TempDir(), "qairt", "2.40.0.251030")
	bin := filepath.Join(root, qnnpack.HostBinDir)
	lib := filepath.Join(root, qnnpack.HostLibDir)
	for _, d := range []string{bin, lib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = "/usr/local/go/bin/go"
	}
	// testkit.File names testdata/...; the tool's source is beside it.
	src := filepath.Join(filepath.Dir(testkit.File(".")), "qnnpack", "testdata", "fakesdk")
	tool := filepath.Join(bin, qnnpack.ToolConverter)
	if out, err := exec.Command(gobin, "build", "-o", tool, src).CombinedOutput(); err != nil {
		tb.Fatalf("build fake SDK: %v\n%s", err, out)
	}
	if err := os.Link(tool, filepath.Join(bin, qnnpack.ToolCtxGen)); err != nil {
		tb.Fatal(err)
	}
	for _, l := range []string{qnnpack.LibHtp, qnnpack.LibHtpExtensions} {
		if err := os.WriteFile(filepath.Join(lib, l), []byte("fake "+l), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return root
}
