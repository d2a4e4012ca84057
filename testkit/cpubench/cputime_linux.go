package cpubench

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Thread is the CPU time of the calling OS thread, 0 when unavailable.
func Thread() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// Process is the CPU time (user + system) of the whole process, 0 when
// unavailable.
func Process() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// HugePages asks Linux to back the whole 2 MiB pages of b with huge pages
// (best effort), as package runtime does for model weights.
func HugePages(b []byte) {
	const huge = 2 << 20
	if len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	lo := int((p+huge-1)&^(huge-1) - p)
	hi := int((p+uintptr(len(b)))&^(huge-1) - p)
	if hi > lo {
		_ = unix.Madvise(b[lo:hi], unix.MADV_COLLAPSE)
	}
}
