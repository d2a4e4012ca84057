package mmapfile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestPopulateHuge checks that populating a slice in the middle of a
// mapping marks the whole mapping for huge pages (smaps VmFlags "hg") in
// one piece, so that no 2 MiB range of it is cut off, that the slice's
// pages are resident afterwards, and that the contents stay as they were.
func TestPopulateHuge(t *testing.T) {
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || bytes.Contains(b, []byte("[never]")) {
		t.Skip("transparent huge pages are off here")
	}
	want := bytes.Repeat([]byte("qnnprep!"), 1<<20) // 8 MiB
	b := mapTemp(t, want)
	span := b[3<<20+100 : 5<<20+7]
	PopulateHuge([][]byte{span})
	lo := uintptr(unsafe.Pointer(&b[0]))
	huge, resident := hugeMapped(lo, lo+uintptr(len(b)))
	if resident < int64(len(span)) || huge > resident {
		t.Errorf("after PopulateHuge: %d bytes resident (%d in huge pages), want at least the span's %d", resident, huge, len(span))
	}
	if !bytes.Equal(b, want) {
		t.Fatal("contents changed after PopulateHuge")
	}
	vmas, err := vmaFlags(lo, lo+uintptr(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(vmas) != 1 || !strings.Contains(" "+vmas[0]+" ", " hg ") {
		t.Fatalf("mapping's VmFlags per region %q, want one region flagged hg", vmas)
	}
	// A heap slice is not a mapping: nothing happens to it.
	heap := append([]byte(nil), want...)
	PopulateHuge([][]byte{heap, nil})
	if !bytes.Equal(heap, want) {
		t.Fatal("PopulateHuge changed a heap slice")
	}
}

// vmaFlags returns the VmFlags of every region of /proc/self/smaps that
// overlaps [lo, hi).
func vmaFlags(lo, hi uintptr) ([]string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := s.Text()
		if fs := strings.Fields(l); len(fs) > 0 && strings.Contains(fs[0], "-") && !strings.HasSuffix(fs[0], ":") {
			var s, e uintptr
			if _, err := fmt.Sscanf(fs[0], "%x-%x", &s, &e); err != nil {
				return nil, fmt.Errorf("smaps line %q: %w", l, err)
			}
			in = s < hi && e > lo
			continue
		}
		if v, ok := strings.CutPrefix(l, "VmFlags:"); ok && in {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out, s.Err()
}

// initialized is in the executable's writable data segment (an
// initialized array without pointers: .noptrdata), mapped from the file.
var initialized = [3 << 12]byte{0: 1, 1 << 12: 2, 2 << 12: 3}

// TestReleaseExecutable checks that releaseExecutable (PopulateHuge's
// settle step) lowers the resident set of the executable's mappings, and
// that the program and its data are unchanged afterwards: a write to the data segment made before
// the release is still there (MADV_PAGEOUT never drops a modified page).
func TestReleaseExecutable(t *testing.T) {
	exeResident := func() int64 {
		exe, err := os.Readlink("/proc/self/exe")
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, r := range smapsRegions(t) {
			if r.path == exe {
				total += r.rss
			}
		}
		return total
	}
	initialized[1<<12] = 42
	before := exeResident()
	releaseExecutable()
	after := exeResident()
	if before == 0 || after >= before {
		t.Errorf("executable resident %d KiB before, %d KiB after releaseExecutable: want fewer after", before>>10, after>>10)
	}
	if got := [3]byte{initialized[0], initialized[1<<12], initialized[2<<12]}; got != [3]byte{1, 42, 3} {
		t.Errorf("data segment after releaseExecutable: %v, want [1 42 3]", got)
	}
}

type smapsRegion struct {
	path string
	rss  int64 // bytes
}

// smapsRegions returns every region of /proc/self/smaps with its
// resident bytes.
func smapsRegions(t *testing.T) []smapsRegion {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	var rs []smapsRegion
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			r := smapsRegion{}
			if len(fields) == 6 {
				r.path = fields[5]
			}
			rs = append(rs, r)
			continue
		}
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "Rss: %d kB", &kb); n == 1 && len(rs) > 0 {
			rs[len(rs)-1].rss = kb << 10
		}
	}
	return rs
}

// TestDropFilePages checks what releaseExecutable does to a shared
// library's mappings, on a private mapping of a file: the resident pages
// that are still the file's leave the resident set, and a page the process
// wrote (its own copy) stays, written contents and all, as the dynamic
// linker's relocations in a library's data must.
func TestDropFilePages(t *testing.T) {
	const page = 4096
	if os.Getpagesize() != page {
		t.Skip("pagemap walk is for 4 KiB pages")
	}
	want := bytes.Repeat([]byte("library!"), 64*page/8)
	p := filepath.Join(t.TempDir(), "lib")
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), 0, len(want), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		t.Skip("no private mapping here:", err)
	}
	defer unix.Munmap(b)
	for i := 0; i < len(b); i += page {
		touched += b[i]
	}
	b[10*page+5] = '!' // the process's own copy of page 10
	want[10*page+5] = '!'
	lo := uintptr(unsafe.Pointer(&b[0]))
	_, before := hugeMapped(lo, lo+uintptr(len(b)))
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skip(err)
	}
	defer pagemap.Close()
	dropFilePages(pagemap, lo, lo+uintptr(len(b)))
	_, after := hugeMapped(lo, lo+uintptr(len(b)))
	if before < 64*page || after != page {
		t.Errorf("resident before %d KiB, after %d KiB: want all 256 before and only the written page's 4 after", before>>10, after>>10)
	}
	if !bytes.Equal(b, want) {
		t.Fatal("contents changed after dropFilePages: a written page lost its copy")
	}
}

var touched byte
