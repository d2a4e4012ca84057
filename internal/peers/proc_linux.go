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

// MaxRSS is the peak resident set of an exited child, in bytes (0 where
// the system does not say).
func MaxRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024 // kilobytes on Linux
	}
	return 0
}
