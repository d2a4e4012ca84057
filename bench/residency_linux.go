package bench

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residency counts the pages of file p resident in the page cache
// (mincore over a read-only mapping).
func residency(p string) (in, total int64, ok bool) {
	f, err := os.Open(p)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0, 0, false
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, false
	}
	defer unix.Munmap(data)
	page := int64(os.Getpagesize())
	vec := make([]byte, (fi.Size()+page-1)/page)
	// x/sys/unix has no Mincore wrapper on Linux.
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, 0, false
	}
	for _, v := range vec {
		if v&1 != 0 {
			in++
		}
	}
	return in, int64(len(vec)), true
}
