//go:build unix

package qnnpack

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// ownGroup starts the tool in a process group of its own, so that what it
// spawns can be stopped with it.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends SIGKILL to the tool's process group; a group already
// gone is fine.
func killGroup(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
