package mmapfile

import (
	"bufio"
	"bytes"
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
	// Read line by line, parsing in place: PopulateHuge calls this with
	// the weights just mapped, and the whole file read at once with each
	// line through fmt would leave about 0.5 MB of garbage on the heap at
	// the process's peak.
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if lo, rest := hexPrefix(line); len(rest) > 0 && rest[0] == '-' && len(rest) < len(line) {
			if hi, rest := hexPrefix(rest[1:]); len(rest) > 0 && rest[0] == ' ' {
				in = lo < end && hi > start
				continue
			}
		}
		if !in {
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("Rss:")); ok {
			resident += kiB(v)
		} else if v, ok := bytes.CutPrefix(line, []byte("FilePmdMapped:")); ok {
			huge += kiB(v)
		}
	}
	return huge, resident
}

// hexPrefix parses the hexadecimal digits b starts with and returns the
// rest (all of b if it starts with none).
func hexPrefix(b []byte) (v uintptr, rest []byte) {
	for i, c := range b {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | uintptr(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uintptr(c-'a'+10)
		default:
			return v, b[i:]
		}
	}
	return v, nil
}

// kiB returns the bytes of an smaps value, "    1234 kB".
func kiB(b []byte) int64 {
	b = bytes.TrimLeft(b, " ")
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n << 10
}

// dropCache writes the file's dirty pages and drops its cached pages in
// [off, off+n) (n = 0: to the end) that no process maps, so that they are
// read again (best effort).
func dropCache(fd int, off, n int64) {
	unix.Fdatasync(fd)
	unix.Fadvise(fd, off, n, unix.FADV_DONTNEED)
}

// releaseExecutable drops the pages of the program's code and data from
// the process: the executable's own mappings and those of the shared
// libraries it loaded (libc, when cgo is linked in), every file that has
// an executable mapping. The executable takes MADV_PAGEOUT, which
// reclaims only pages never written and keeps every modified one (in a
// PIE binary the dynamic linker relocates the RELRO pages before making
// them read-only), after MADV_RANDOM: where the page cache held the file
// in large folios (readahead on ext4 and XFS on recent kernels), a fault
// maps the whole folio, hundreds of KiB for one function; with RANDOM the
// pages used again are read back one by one into small folios. Measured
// on Linux 6.18, Q1_0 run: 1.5 MB less resident at the peak than with
// PAGEOUT alone, for about 300 page reads (from the page cache of the
// host here; time to first token unchanged within noise). The
// libraries' pages are mapped by other processes too, which PAGEOUT
// leaves alone; they take MADV_DONTNEED on just the pages
// /proc/self/pagemap shows as still the file's (a written page is the
// process's own copy, which DONTNEED would lose).
func releaseExecutable() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	type mapping struct {
		lo, hi uintptr
		path   string
	}
	var maps []mapping
	code := map[string]bool{} // files with an executable mapping
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := bytes.Fields(line)
		// Private file mappings only: the model files are shared ones.
		if len(f) != 6 || len(f[1]) != 4 || f[1][3] != 'p' || f[5][0] != '/' {
			continue
		}
		lo, rest := hexPrefix(f[0])
		if len(rest) == len(f[0]) || len(rest) < 2 || rest[0] != '-' {
			continue
		}
		hi, rest := hexPrefix(rest[1:])
		if len(rest) != 0 || hi <= lo {
			continue
		}
		maps = append(maps, mapping{lo, hi, string(f[5])})
		if f[1][2] == 'x' {
			code[string(f[5])] = true
		}
	}
	pagemap, err := os.Open("/proc/self/pagemap")
	if err == nil {
		defer pagemap.Close()
	}
	for _, m := range maps {
		switch {
		case m.path == exe:
			// By address: the mappings are not Go slices.
			unix.Syscall(unix.SYS_MADVISE, m.lo, m.hi-m.lo, unix.MADV_RANDOM)
			unix.Syscall(unix.SYS_MADVISE, m.lo, m.hi-m.lo, unix.MADV_PAGEOUT)
		case code[m.path] && pagemap != nil:
			dropFilePages(pagemap, m.lo, m.hi)
		}
	}
}

// dropFilePages advises MADV_DONTNEED on each run of pages in [lo, hi)
// that are resident and still the file's own (pagemap bits 63 "present"
// and 61 "file page"), leaving the process's written copies in place.
func dropFilePages(pagemap *os.File, lo, hi uintptr) {
	const page = 4096
	if os.Getpagesize() != page {
		return
	}
	var buf [8 * 512]byte
	run := uintptr(0) // start of the current run, 0 if none
	flush := func(end uintptr) {
		if run != 0 {
			unix.Syscall(unix.SYS_MADVISE, run, end-run, unix.MADV_DONTNEED)
			run = 0
		}
	}
	a := lo
	for a < hi {
		n := min((hi-a)/page, uintptr(len(buf)/8))
		if n == 0 {
			break
		}
		k, err := pagemap.ReadAt(buf[:8*n], int64(a/page*8))
		if err != nil || k != int(8*n) {
			break
		}
		for i := uintptr(0); i < n; i, a = i+1, a+page {
			if flags := buf[8*i+7]; flags&0x80 != 0 && flags&0x20 != 0 {
				if run == 0 {
					run = a
				}
			} else {
				flush(a)
			}
		}
	}
	flush(a)
}
