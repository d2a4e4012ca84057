//go:build !unix

package qnnpack

import (
	"errors"
	"os"
	"os/exec"
)

// ownGroup does nothing where there are no Unix process groups (Windows):
// the tool alone is stopped.
func ownGroup(*exec.Cmd) {}

// killGroup kills the tool's process; one already gone is fine.
func killGroup(p *os.Process) error {
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
