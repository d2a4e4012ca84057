package int8

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time of the calling OS thread: on a shared machine
// it measures a kernel's own cost where wall time does not.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// hugePages asks Linux to back the whole 2 MiB pages of b with huge pages
// (best effort), as package runtime does for model weights.
func hugePages(b []byte) {
	const huge = 2 << 20
	p := uintptr(unsafe.Pointer(&b[0]))
	lo := int((p+huge-1)&^(huge-1) - p)
	hi := int((p+uintptr(len(b)))&^(huge-1) - p)
	if hi > lo {
		_ = unix.Madvise(b[lo:hi], unix.MADV_COLLAPSE)
	}
}
