// Package mmapfile maps model files read-only and lets streaming readers
// give pages back once they are done with them, so reading a model larger
// than memory keeps a bounded resident set.
package mmapfile

import (
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"
)

var (
	mu      sync.Mutex
	regions = map[uintptr]uintptr{} // start → end of every live mapping
	fds     = map[uintptr]int{}     // start → a duplicate of the mapped file's descriptor (read-only maps)
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
	fd := dupFd(f)
	mu.Lock()
	regions[start] = start + uintptr(len(b))
	if fd >= 0 {
		fds[start] = fd
	}
	mu.Unlock()
	return b, nil
}

// ReadInto copies src, which must lie inside a mapping made by Map, into
// dst (len(dst) ≥ len(src)) with pread on the mapped file instead of
// through the mapping: the bytes come from the page cache without the
// mapping's pages being faulted in (and later released). It reports false,
// leaving dst undefined, if src is not inside such a mapping or the read
// fails; the caller then reads src itself.
func ReadInto(dst, src []byte) bool {
	if len(src) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(&src[0]))
	hi := lo + uintptr(len(src))
	fd, off := -1, int64(0)
	mu.Lock()
	for s, e := range regions {
		if lo >= s && hi <= e {
			if f, ok := fds[s]; ok {
				fd, off = f, int64(lo-s)
			}
			break
		}
	}
	mu.Unlock()
	if fd < 0 {
		return false
	}
	dst = dst[:len(src)]
	for len(dst) > 0 {
		n, err := pread(fd, dst, off)
		if err != nil || n <= 0 {
			return false
		}
		dst, off = dst[n:], off+int64(n)
	}
	return true
}

// CanReadInto reports whether ReadInto can serve src.
func CanReadInto(src []byte) bool {
	if len(src) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(&src[0]))
	hi := lo + uintptr(len(src))
	mu.Lock()
	defer mu.Unlock()
	for s, e := range regions {
		if lo >= s && hi <= e {
			_, ok := fds[s]
			return ok
		}
	}
	return false
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
	start := uintptr(unsafe.Pointer(&b[0]))
	mu.Lock()
	delete(regions, start)
	fd, ok := fds[start]
	delete(fds, start)
	mu.Unlock()
	if ok {
		closeFd(fd)
	}
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

// PopulateHuge maps the pages under every span (each inside a mapping
// made by Map) into the process for a reader that streams them again and
// again, as a decoder reads every weight once per token: in 2 MiB pages
// where the file's page cache can hold 2 MiB folios (file systems with
// large folios: XFS, ext4 since Linux 6.16), so that the stream takes few
// TLB misses. Each mapping is advised for huge pages as a whole, because a
// huge page only maps a 2 MiB range that lies inside one advised region.
// Pages already cached in small folios (a file just written, or read
// before without the advice) stay small; when much of a mapping is small
// and the file system can hold the file in huge folios (some of the
// mapping came in huge, or one 2 MiB range of it does when read again),
// the file's cached pages that no process maps are dropped and read
// again, once, in huge folios that later runs then find cached. Contents
// never change; spans outside such mappings are left alone.
func PopulateHuge(spans [][]byte) {
	if settle.Load() {
		debug.FreeOSMemory()
		releaseExecutable()
	}
	type region struct {
		start, end uintptr
		whole      []byte // the whole mapping, pages rounded up
	}
	var maps []region
	page := uintptr(os.Getpagesize())
	seen := map[uintptr]bool{}
	mu.Lock()
	for _, b := range spans {
		if len(b) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(&b[0]))
		for s, e := range regions {
			if lo >= s && lo < e && !seen[s] {
				if _, ok := fds[s]; ok { // read-only maps only
					seen[s] = true
					p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), -int(lo-s))
					maps = append(maps, region{s, e, unsafe.Slice((*byte)(p), (e-s+page-1)&^(page-1))})
				}
			}
		}
	}
	mu.Unlock()
	for _, r := range maps {
		adviseHuge(r.whole)
	}
	for _, b := range spans {
		Populate(b, false)
	}
	again := false
	for _, r := range maps {
		huge, resident := hugeMapped(r.start, r.end)
		if resident == 0 || huge >= resident/10*9 {
			continue // unknown, or nearly all huge already
		}
		mu.Lock()
		fd, ok := fds[r.start]
		mu.Unlock()
		if !ok {
			continue
		}
		if huge == 0 {
			// Try one 2 MiB range in the middle before reading the
			// whole file again.
			const h = 2 << 20
			off := len(r.whole) / 2 &^ (h - 1)
			if off+h > len(r.whole) {
				continue
			}
			dontNeed(r.whole[off : off+h])
			dropCache(fd, int64(off), h)
			Populate(r.whole[off:off+h], false)
			if huge, _ := hugeMapped(r.start, r.end); huge == 0 {
				continue // the file system keeps small folios
			}
		}
		dontNeed(r.whole)
		dropCache(fd, 0, 0)
		again = true
	}
	if again {
		for _, b := range spans {
			Populate(b, false)
		}
	}
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

var settle atomic.Bool

// SettleBeforePopulate makes every later PopulateHuge first give back what
// the process used to get there, for a program whose resident set should
// be the weights it maps (qnnprep's decoding commands): a garbage
// collection returns the free heap to the system (what reading the
// model's metadata and building the tokenizer left) and releaseExecutable
// drops the pages of the program's code and data (its executable's and its
// shared libraries') that initialization and start-up touched (every
// package's init, flag parsing, the GGUF parser), keeping every page the
// program wrote. The weights then come in on a small resident set, and the
// process's peak is the weights plus what decoding itself touches. It
// costs a collection of a small heap and the page faults of the code that
// runs again, served from the page cache.
func SettleBeforePopulate() { settle.Store(true) }
