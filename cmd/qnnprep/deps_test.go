package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The binary links no test kit: nothing that imports testing (testkit,
// whose Need and fixtures are for tests only) may reach it.
func TestNoTestKitsInBinary(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || strings.HasPrefix(pkg, "testing/") || strings.HasPrefix(pkg, "github.com/qnnprep/qnnprep/testkit") {
			t.Errorf("qnnprep links %s", pkg)
		}
	}
}
