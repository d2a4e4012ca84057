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

// dupFd keeps the mapped file readable after the caller closes it (-1 if
// it cannot).
func dupFd(f *os.File) int {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return -1
	}
	unix.CloseOnExec(fd)
	return fd
}

func closeFd(fd int) { unix.Close(fd) }

func pread(fd int, b []byte, off int64) (int, error) { return unix.Pread(fd, b, off) }
