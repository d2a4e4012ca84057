// Package mmapfile maps model files read-only and lets streaming readers
// give pages back once they are done with them, so reading a model larger
// than memory keeps a bounded resident set.
package mmapfile

import (
	"os"
	"sync"
	"unsafe"
)

var (
	mu      sync.Mutex
	regions = map[uintptr]uintptr{} // start → end of every live mapping
)

// Map maps the first size bytes of f read-only. On failure the caller
// falls back to ReadAt.
func Map(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, os.ErrInvalid
	}
	b, err := mmap(f, int(size))
	if err != nil {
		return nil, err
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	mu.Lock()
	regions[start] = start + uintptr(len(b))
	mu.Unlock()
	return b, nil
}

// MapWritable maps the first size bytes of f (opened read-write and at
// least size bytes long) shared and writable: stores land in the file's
// page cache with no copy. Release drops written pages from the resident
// set without losing them (the mapping is shared). On failure the caller
// falls back to writing.
func MapWritable(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, os.ErrInvalid
	}
	b, err := mmapRW(f, int(size))
	if err != nil {
		return nil, err
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	mu.Lock()
	regions[start] = start + uintptr(len(b))
	mu.Unlock()
	return b, nil
}

// Unmap releases a mapping made by Map or MapWritable.
func Unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	mu.Lock()
	delete(regions, uintptr(unsafe.Pointer(&b[0])))
	mu.Unlock()
	return munmap(b)
}

// Populate maps the pages under b into the process in one go, writable if
// write is set, instead of one page fault per page (or per few pages) as b
// is first touched. Contents do not change. Slices outside a mapping made
// by Map or MapWritable are left alone; write must only be set for
// MapWritable mappings.
func Populate(b []byte, write bool) {
	if len(b) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(&b[0]))
	hi := lo + uintptr(len(b))
	mu.Lock()
	var rs, re uintptr
	for s, e := range regions {
		if lo >= s && hi <= e {
			rs, re = s, e
			break
		}
	}
	mu.Unlock()
	if re == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	alo := max(lo&^(page-1), rs)
	ahi := min((hi+page-1)&^(page-1), (re+page-1)&^(page-1))
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), -int(lo-alo))
	populate(unsafe.Slice((*byte)(p), ahi-alo), write)
}

// Release tells the kernel that the pages wholly inside b will not be
// needed soon; they leave the resident set and are read again from the
// file if touched later. Slices that are not inside a mapping made by Map
// (heap copies, transformed tensors) are left alone.
func Release(b []byte) {
	if len(b) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(&b[0]))
	hi := lo + uintptr(len(b))
	mu.Lock()
	inside := false
	for s, e := range regions {
		if lo >= s && hi <= e {
			inside = true
			break
		}
	}
	mu.Unlock()
	if !inside {
		return
	}
	page := uintptr(os.Getpagesize())
	alo := (lo + page - 1) &^ (page - 1)
	ahi := hi &^ (page - 1)
	if ahi <= alo {
		return
	}
	dontNeed(b[alo-lo : ahi-lo])
}
