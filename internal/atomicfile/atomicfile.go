// Package atomicfile writes output files and directories under a temporary
// name and renames them into place only when they are complete, so an
// interrupted run never leaves a file that looks finished.
//
// Every temporary path is registered until it is committed or aborted;
// RemoveTemps deletes the ones still registered, which is what the CLI's
// signal handler calls before it exits.
//
// Nothing here replaces what the user has. A file is renamed only over a
// regular file (or a symlink to one) that qnnprep wrote: one its
// directory's marker (MarkerName) lists, or one inside a directory
// qnnprep owns whole (a temporary output directory, or an entry a marker
// lists). Committing a file records its name in its directory's marker.
// A directory is replaced only when its marker lists everything in it.
package atomicfile

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

var (
	mu    sync.Mutex
	temps = map[string]bool{}
)

func register(p string)   { mu.Lock(); temps[p] = true; mu.Unlock() }
func unregister(p string) { mu.Lock(); delete(temps, p); mu.Unlock() }

// RemoveTemps deletes every temporary file or directory that has been
// created and neither committed nor aborted yet. It is safe to call from a
// signal handler goroutine.
func RemoveTemps() {
	mu.Lock()
	defer mu.Unlock()
	for p := range temps {
		os.RemoveAll(p)
		delete(temps, p)
	}
}

// tempName returns a hidden sibling of path: ".base.tmp-<random>".
func tempName(path string) string {
	var b [6]byte
	rand.Read(b[:])
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(b[:]))
}

// IsTemp reports whether name looks like a temporary name made here.
func IsTemp(name string) bool {
	base := filepath.Base(name)
	if len(base) < 1 || base[0] != '.' {
		return false
	}
	for i := 0; i+5 <= len(base); i++ {
		if base[i:i+5] == ".tmp-" {
			return true
		}
	}
	return false
}

// File is an output file that gets its final name only on Commit.
type File struct {
	*os.File
	final string
	done  bool
}

// Create opens a new temporary file beside path.
func Create(path string) (*File, error) {
	tmp := tempName(path)
	register(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		unregister(tmp)
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &File{File: f, final: path}, nil
}

// Commit flushes the file to disk and renames it to its final name,
// which must not hold a file qnnprep did not write (CheckFile), and
// records the name in its directory's marker.
func (f *File) Commit() error { return f.commit(placeOwned) }

func (f *File) commit(put func(tmp, final string) error) error {
	if f.done {
		return errors.New("atomicfile: commit after commit or abort")
	}
	f.done = true
	tmp := f.Name()
	defer unregister(tmp)
	if err := f.Sync(); err != nil {
		f.File.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", f.final, err)
	}
	if err := f.File.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", f.final, err)
	}
	if err := put(tmp, f.final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", f.final, err)
	}
	return nil
}

// fileMu serialises the check, the marker update and the rename of every
// commit in this process, so two files committed into one directory at
// once both end up in its marker.
var fileMu sync.Mutex

// placeOwned is place for an output: an existing file at final is
// replaced only if qnnprep wrote it (owner), and final's name is recorded
// in its directory's marker (before the rename, as Claim does, so an
// interrupted run leaves a file the next run may replace) unless a
// directory above covers it.
func placeOwned(tmp, final string) error {
	fileMu.Lock()
	defer fileMu.Unlock()
	o, err := owner(final)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(final)
	switch {
	case err == nil:
		if err := checkRegular(final, fi); err != nil {
			return err
		}
		if o == notOwned {
			return notWritten(final)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if o == notOwned {
		// RemoveTemps (an interrupt) may have taken tmp while it synced:
		// then there is nothing to record.
		if _, err := os.Lstat(tmp); err != nil {
			return err
		}
		dir, base := splitFinal(final)
		if err := record(dir, base); err != nil {
			return err
		}
		if err := place(tmp, final); err != nil {
			// Whatever is at final now (a file that appeared meanwhile)
			// is not ours: take the name back out.
			unrecord(dir, base)
			return err
		}
		return nil
	}
	return place(tmp, final)
}

// ErrNotWritten is returned for an output path holding a file qnnprep did
// not write (its directory's marker does not list it).
var ErrNotWritten = errors.New("exists and qnnprep did not write it")

func notWritten(path string) error {
	dir, _ := splitFinal(path)
	return fmt.Errorf("%s %w (it is not listed in %s); remove it or choose another output name", path, ErrNotWritten, filepath.Join(dir, MarkerName))
}

// splitFinal returns path's directory ("." for a bare name) and base.
func splitFinal(path string) (dir, base string) {
	path = filepath.Clean(path)
	return filepath.Dir(path), filepath.Base(path)
}

// ownership is what owner found for a path.
type ownership int

const (
	notOwned ownership = iota // no marker lists it (nor any directory above it)
	listed                    // its directory's marker lists it
	covered                   // it lies in a directory qnnprep owns whole
)

// owner reports whether path is qnnprep's: listed in its directory's
// marker, or covered by a directory above it that is a temporary output
// directory of this process (CreateDir) or an entry some marker lists
// (an output directory, or a Claim'd one, is qnnprep's whole, as
// CheckOwned treats it). Whether anything exists at path does not matter.
func owner(path string) (ownership, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return notOwned, err
	}
	temps := tempDirs()
	child := abs
	for {
		dir := filepath.Dir(child)
		if dir == child {
			return notOwned, nil
		}
		if temps[dir] {
			return covered, nil
		}
		names, err := readMarker(dir)
		if err != nil {
			return notOwned, fmt.Errorf("%s: %w", filepath.Join(dir, MarkerName), err)
		}
		if names[filepath.Base(child)] {
			if child == abs {
				return listed, nil
			}
			return covered, nil
		}
		child = dir
	}
}

// tempDirs returns the absolute paths of the registered temporaries.
func tempDirs() map[string]bool {
	mu.Lock()
	defer mu.Unlock()
	m := make(map[string]bool, len(temps))
	for p := range temps {
		if a, err := filepath.Abs(p); err == nil {
			m[a] = true
		}
	}
	return m
}

// recordable reports whether base can be a line of a marker.
func recordable(base string) error {
	if strings.ContainsAny(base, "\n\r") || strings.HasPrefix(base, "#") {
		return fmt.Errorf("output name %q cannot be recorded in %s (it holds a line break or starts with '#'); choose another name", base, MarkerName)
	}
	return nil
}

// record adds base to dir's marker, creating the marker if needed.
func record(dir, base string) error {
	if err := recordable(base); err != nil {
		return err
	}
	names, err := readMarker(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, MarkerName), err)
	}
	if names[base] {
		return nil
	}
	if names == nil {
		names = map[string]bool{}
	}
	names[base] = true
	if err := writeMarker(dir, names); err != nil {
		return fmt.Errorf("record %s in %s: %w", base, filepath.Join(dir, MarkerName), err)
	}
	return nil
}

// unrecord takes base back out of dir's marker, best effort, and removes
// the marker when it then lists nothing (it says nothing then: a directory
// with no marker and one listing nothing are the same to CheckOwned).
func unrecord(dir, base string) {
	names, err := readMarker(dir)
	if err != nil || !names[base] {
		return
	}
	delete(names, base)
	if len(names) == 0 {
		os.Remove(filepath.Join(dir, MarkerName))
		return
	}
	writeMarker(dir, names)
}

// Remove deletes the file at path, which qnnprep wrote, and its name from
// its directory's marker, so that a scratch output (bench's) leaves no
// trace. It refuses a file qnnprep did not write.
func Remove(path string) error {
	fileMu.Lock()
	defer fileMu.Unlock()
	o, err := owner(path)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	} else if err == nil {
		if o == notOwned {
			return notWritten(path)
		}
		if err := checkRegular(path, fi); err != nil {
			return err
		}
		err = os.Remove(path)
	}
	if o == listed {
		unrecord(splitFinal(path))
	}
	return err
}

// ErrNotRegular is returned when an output path holds something other
// than a regular file (a device node, a directory, a fifo, a socket).
var ErrNotRegular = errors.New("exists and is not a regular file; refusing to replace it")

// place moves the finished temporary file tmp to final. A final path that
// does not exist is taken with link(2), which fails rather than replace
// whatever appeared there since; an existing one must be a regular file
// (or a symlink to one, which the rename replaces, leaving its target).
// Only a file swapped in between the check and the rename can slip through.
// Whose file it is, placeOwned decides; place itself writes no marker.
func place(tmp, final string) error {
	fi, err := os.Lstat(final)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Link(tmp, final); err == nil {
			return os.Remove(tmp)
		} else if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s appeared while writing it; not replaced", final)
		}
		// No hard links on this file system: fall back to the rename.
		fi, err = os.Lstat(final)
	}
	switch {
	case err == nil:
		if err := checkRegular(final, fi); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return os.Rename(tmp, final)
}

// checkRegular returns ErrNotRegular unless fi (from Lstat of path) is a
// regular file or a symlink to one.
func checkRegular(path string, fi fs.FileInfo) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Stat(path)
		if err != nil {
			return nil // a dangling link is replaced, its target never existed
		}
		fi = t
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s (%s) %w", path, kind(fi.Mode()), ErrNotRegular)
	}
	return nil
}

// kind names a file mode's type for messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a fifo"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a regular file"
}

// CheckFile returns an error if path exists and is not a regular file (or a
// symlink to one), or is a file qnnprep did not write (wrapping
// ErrNotWritten: its directory's marker does not list it and no directory
// above it is qnnprep's), so a command can refuse its output before any
// work. Commit checks again.
func CheckFile(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		if _, base := splitFinal(path); errors.Is(err, fs.ErrNotExist) {
			if o, oerr := owner(path); oerr == nil && o == notOwned {
				return recordable(base)
			}
		}
		return nil
	}
	if err := checkRegular(path, fi); err != nil {
		return err
	}
	o, err := owner(path)
	if err != nil {
		return err
	}
	if o == notOwned {
		return notWritten(path)
	}
	return nil
}

// Abort closes and removes the temporary file. It does nothing after
// Commit, so it can always be deferred.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.Name())
	unregister(f.Name())
}

// Close is Abort: a File must be committed explicitly to keep it.
func (f *File) Close() error { f.Abort(); return nil }

// WriteFile writes data to path atomically.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// MarkerName is the file in every output directory qnnprep writes that
// lists, one per line, the entries it wrote there. A directory holding
// anything the marker does not list is the user's and is never replaced or
// written into (see CheckOwned).
const MarkerName = ".qnnprep-outputs"

const markerHeader = "# written by qnnprep: the entries below are its outputs; it replaces this directory only while nothing else is here\n"

// readMarker returns the names dir's marker lists, or nil without one.
func readMarker(dir string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, MarkerName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			names[l] = true
		}
	}
	return names, sc.Err()
}

// ErrNotOwned is returned for an output directory that holds something
// qnnprep did not write.
var ErrNotOwned = errors.New("holds files qnnprep did not write")

// CheckOwned returns nil if dir may be written or replaced by qnnprep: it
// does not exist, is empty, or holds only what its marker lists (and
// temporaries of an interrupted run). Otherwise the error, wrapping
// ErrNotOwned (or ErrNotRegular when dir is not a directory), names the
// first entry that is not qnnprep's.
func CheckOwned(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s (%s) exists and is not a directory; refusing to replace it", dir, kind(fi.Mode()))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	mine, err := readMarker(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, MarkerName), err)
	}
	for _, e := range ents {
		if n := e.Name(); n != MarkerName && !IsTemp(n) && !mine[n] {
			why := "it has no " + MarkerName
			if mine != nil {
				why = MarkerName + " does not list it"
			}
			return fmt.Errorf("output directory %s %w: %s (%s); remove it or choose an empty or new directory", dir, ErrNotOwned, filepath.Join(dir, n), why)
		}
	}
	return nil
}

// Claim records names in dir's marker, creating dir if needed, before they
// are written: an interrupted run then leaves a directory the next run may
// still write into. It fails, wrapping ErrNotOwned, if dir holds anything
// it did not claim before.
func Claim(dir string, names ...string) error {
	if err := CheckOwned(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	mine, err := readMarker(dir)
	if err != nil {
		return err
	}
	if mine == nil {
		mine = map[string]bool{}
	}
	grew := false
	for _, n := range names {
		if !mine[n] {
			mine[n], grew = true, true
		}
	}
	if !grew {
		if _, err := os.Lstat(filepath.Join(dir, MarkerName)); err == nil {
			return nil
		}
	}
	return writeMarker(dir, mine)
}

func writeMarker(dir string, names map[string]bool) error {
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	slices.Sort(list)
	var b strings.Builder
	b.WriteString(markerHeader)
	for _, n := range list {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	return writeRaw(filepath.Join(dir, MarkerName), []byte(b.String()))
}

// writeRaw writes data to path by write-then-rename like WriteFile but
// with neither the ownership check nor a marker entry: for the marker
// itself.
func writeRaw(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.commit(place)
}

// Dir is an output directory built under a temporary name and renamed to
// its final name on Commit, replacing any previous directory qnnprep wrote
// there (CheckOwned); Commit writes the marker listing its entries.
type Dir struct {
	Path  string // the temporary directory to write into
	final string
	done  bool
}

// CreateDir makes a new temporary directory beside path. It refuses a path
// CheckOwned refuses.
func CreateDir(path string) (*Dir, error) {
	if err := CheckOwned(path); err != nil {
		return nil, err
	}
	tmp := tempName(filepath.Clean(path))
	register(tmp)
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		unregister(tmp)
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		unregister(tmp)
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &Dir{Path: tmp, final: filepath.Clean(path)}, nil
}

// Commit renames the directory into place. An existing directory at the
// final path is moved aside first and removed after the rename.
func (d *Dir) Commit() error {
	if d.done {
		return errors.New("atomicfile: commit after commit or abort")
	}
	d.done = true
	defer unregister(d.Path)
	ents, err := os.ReadDir(d.Path)
	if err != nil {
		os.RemoveAll(d.Path)
		return fmt.Errorf("write %s: %w", d.final, err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	delete(names, MarkerName)
	if err := writeMarker(d.Path, names); err != nil {
		os.RemoveAll(d.Path)
		return fmt.Errorf("write %s: %w", d.final, err)
	}
	// Checked again: something may have been put there since CreateDir.
	if err := CheckOwned(d.final); err != nil {
		os.RemoveAll(d.Path)
		return err
	}
	var old string
	if _, err := os.Lstat(d.final); err == nil {
		old = tempName(d.final)
		register(old)
		defer unregister(old)
		if err := os.Rename(d.final, old); err != nil {
			os.RemoveAll(d.Path)
			return fmt.Errorf("replace %s: %w", d.final, err)
		}
	}
	if err := os.Rename(d.Path, d.final); err != nil {
		if old != "" {
			os.Rename(old, d.final)
		}
		os.RemoveAll(d.Path)
		return fmt.Errorf("write %s: %w", d.final, err)
	}
	if old != "" {
		os.RemoveAll(old)
	}
	return nil
}

// Abort removes the temporary directory; it does nothing after Commit.
func (d *Dir) Abort() {
	if d.done {
		return
	}
	d.done = true
	os.RemoveAll(d.Path)
	unregister(d.Path)
}
