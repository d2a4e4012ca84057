package runtime

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU is the CPU time (user + system) of the whole process: the
// benchmarks' own cost on a machine shared with other work.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
