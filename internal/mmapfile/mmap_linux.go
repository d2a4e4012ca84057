package mmapfile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// populate prefaults b's pages in one call (Linux 5.14+; older kernels
// reject the advice and the pages fault in one by one as before).
func populate(b []byte, write bool) {
	advice := unix.MADV_POPULATE_READ
	if write {
		advice = unix.MADV_POPULATE_WRITE
	}
	unix.Madvise(b, advice)
}

// adviseHuge sets MADV_HUGEPAGE on b (best effort: kernels without
// transparent huge pages refuse it and nothing changes).
func adviseHuge(b []byte) { unix.Madvise(b, unix.MADV_HUGEPAGE) }

// hugeMapped reports how many bytes of the regions of /proc/self/smaps
// that overlap [start, end) are mapped by huge pages of a file
// (FilePmdMapped) and how many are resident (Rss); 0, 0 if unknown.
func hugeMapped(start, end uintptr) (huge, resident int64) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, 0
	}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(string(line), "%x-%x ", &lo, &hi); n == 2 && bytes.IndexByte(line, ' ') > bytes.IndexByte(line, '-') {
			in = lo < end && hi > start
			continue
		}
		if !in {
			continue
		}
		var kb int64
		if n, _ := fmt.Sscanf(string(line), "Rss: %d kB", &kb); n == 1 {
			resident += kb << 10
		} else if n, _ := fmt.Sscanf(string(line), "FilePmdMapped: %d kB", &kb); n == 1 {
			huge += kb << 10
		}
	}
	return huge, resident
}

// dropCache writes the file's dirty pages and drops its cached pages in
// [off, off+n) (n = 0: to the end) that no process maps, so that they are
// read again (best effort).
func dropCache(fd int, off, n int64) {
	unix.Fdatasync(fd)
	unix.Fadvise(fd, off, n, unix.FADV_DONTNEED)
}

// releaseExecutable drops the pages of the executable's own mappings from
// the process: code with MADV_DONTNEED (it comes back from the page cache
// where used again), read-only and writable data with MADV_PAGEOUT, which
// reclaims only pages never written and keeps every modified one: in a
// PIE binary the dynamic linker relocates the RELRO pages before making
// them read-only, and DONTNEED would put the file's unrelocated bytes back.
func releaseExecutable() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) != 6 || string(f[5]) != exe {
			continue
		}
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(string(f[0]), "%x-%x", &lo, &hi); n != 2 || hi <= lo {
			continue
		}
		advice := unix.MADV_DONTNEED
		switch string(f[1]) {
		case "r-xp":
		case "r--p", "rw-p":
			advice = unix.MADV_PAGEOUT
		default:
			continue
		}
		// By address: the mappings are not Go slices.
		unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, uintptr(advice))
	}
}
