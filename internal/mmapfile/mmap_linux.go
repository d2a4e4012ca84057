package mmapfile

import "golang.org/x/sys/unix"

// populate prefaults b's pages in one call (Linux 5.14+; older kernels
// reject the advice and the pages fault in one by one as before).
func populate(b []byte, write bool) {
	advice := unix.MADV_POPULATE_READ
	if write {
		advice = unix.MADV_POPULATE_WRITE
	}
	unix.Madvise(b, advice)
}
