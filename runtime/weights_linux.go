package runtime

import (
	"bytes"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePagesAvailable reports whether transparent huge pages can back
// memory that asks for them (mode "always" or "madvise").
func hugePagesAvailable() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && (bytes.Contains(b, []byte("[always]")) || bytes.Contains(b, []byte("[madvise]")))
}

// adviseHuge asks for transparent huge pages over the whole huge pages of
// b: before b is written, so that its page faults take huge pages, and
// again after (collapse), for memory the Go heap had already touched.
func adviseHuge(b []byte, collapse bool) {
	start := (uintptr(unsafe.Pointer(&b[0])) + hugeAlign - 1) &^ (hugeAlign - 1)
	end := (uintptr(unsafe.Pointer(&b[0])) + uintptr(len(b))) &^ (hugeAlign - 1)
	if end <= start {
		return
	}
	lo := int(start - uintptr(unsafe.Pointer(&b[0])))
	advice := unix.MADV_HUGEPAGE
	if collapse {
		advice = unix.MADV_COLLAPSE // Linux 6.1 and later
	}
	_ = unix.Madvise(b[lo:lo+int(end-start)], advice) // best effort
}

// availableMemory is MemAvailable from /proc/meminfo in bytes, or 0.
func availableMemory() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var kb uint64
		if n, _ := fmt.Sscanf(string(line), "MemAvailable: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return 0
}
