//go:build unix

package safetensors

import (
	"os"

	"golang.org/x/sys/unix"
)

// mmap maps the whole file read-only. A nil slice and an error mean the
// caller falls back to ReadAt.
func mmap(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, os.ErrInvalid
	}
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func munmap(b []byte) error { return unix.Munmap(b) }
