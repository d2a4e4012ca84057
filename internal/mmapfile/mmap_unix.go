//go:build unix

package mmapfile

import (
	"os"

	"golang.org/x/sys/unix"
)

func mmap(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
}

func munmap(b []byte) error { return unix.Munmap(b) }

// MADV_DONTNEED on a shared read-only file mapping drops the pages; the
// next access faults them in from the file again, so contents never change.
func dontNeed(b []byte) { unix.Madvise(b, unix.MADV_DONTNEED) }
