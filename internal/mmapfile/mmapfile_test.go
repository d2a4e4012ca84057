package mmapfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestReleaseKeepsContents(t *testing.T) {
	want := bytes.Repeat([]byte("qnnprep!"), 64<<10) // 512 KiB
	b := mapTemp(t, want)
	Release(b[100 : len(b)-100])
	if !bytes.Equal(b, want) {
		t.Fatal("contents changed after Release")
	}
	// A heap slice is not a mapping: Release must not touch it.
	heap := append([]byte(nil), want...)
	Release(heap)
	if !bytes.Equal(heap, want) {
		t.Fatal("Release changed a heap slice")
	}
}

func TestMapWritableKeepsReleasedWrites(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n = 1 << 20
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	b, err := MapWritable(f, n)
	if err != nil {
		t.Skip("no mmap here:", err)
	}
	want := bytes.Repeat([]byte("written!"), n/8)
	copy(b, want)
	Release(b[:n/2]) // written pages leave the process, not the file
	copy(b[n/2:], want[n/2:])
	if err := Unmap(b); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("file contents differ from what was written through the mapping")
	}
}

func TestReadIntoMatchesMapping(t *testing.T) {
	want := make([]byte, 300<<10)
	for i := range want {
		want[i] = byte(i * 7)
	}
	b := mapTemp(t, want)
	if !CanReadInto(b[10:20]) {
		t.Skip("no pread here")
	}
	dst := make([]byte, 100<<10)
	for _, r := range [][2]int{{0, 1}, {4095, 4097}, {12345, 12345 + 100<<10}, {len(want) - 5, len(want)}} {
		if !ReadInto(dst, b[r[0]:r[1]]) {
			t.Fatalf("ReadInto %v failed", r)
		}
		if !bytes.Equal(dst[:r[1]-r[0]], want[r[0]:r[1]]) {
			t.Fatalf("ReadInto %v: wrong bytes", r)
		}
	}
	if ReadInto(dst, append([]byte(nil), want[:10]...)) {
		t.Fatal("ReadInto served a heap slice")
	}
}

// mapTemp writes data to a temporary file and maps it for the test (the
// test is skipped where mmap is missing).
func mapTemp(t *testing.T, data []byte) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Map(f, int64(len(data)))
	f.Close() // the mapping keeps its own descriptor
	if err != nil {
		t.Skip("no mmap here:", err)
	}
	t.Cleanup(func() { Unmap(b) })
	return b
}
