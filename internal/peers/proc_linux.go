package peers

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the helper when this process dies,
// so a test binary killed by its timeout leaves no node or python behind
// (a hung node-llama-cpp ignores SIGTERM and keeps its memory).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
