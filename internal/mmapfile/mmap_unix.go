//go:build unix

package mmapfile

import (
	"os"

	"golang.org/x/sys/unix"
)

func mmap(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
}

func mmapRW(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

func munmap(b []byte) error { return unix.Munmap(b) }

// MADV_DONTNEED on a shared file mapping drops the pages from the process;
// they stay in the file's page cache (written ones included) and the next
// access faults them in again, so contents never change.
func dontNeed(b []byte) { unix.Madvise(b, unix.MADV_DONTNEED) }
