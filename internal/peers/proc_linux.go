package peers

import (
	"os"
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the helper when this process dies,
// so a test binary killed by its timeout leaves no node or python behind
// (a hung node-llama-cpp ignores SIGTERM and keeps its memory).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// maxRSS is the peak resident set of an exited child, in bytes.
func maxRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024 // kilobytes on Linux
	}
	return 0
}
