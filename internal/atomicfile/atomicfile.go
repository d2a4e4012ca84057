// Package atomicfile writes output files and directories under a temporary
// name and renames them into place only when they are complete, so an
// interrupted run never leaves a file that looks finished.
//
// Every temporary path is registered until it is committed or aborted;
// RemoveTemps deletes the ones still registered, which is what the CLI's
// signal handler calls before it exits.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Commit flushes the file to disk and renames it to its final name.
func (f *File) Commit() error {
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
	if err := os.Rename(tmp, f.final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", f.final, err)
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

// Dir is an output directory built under a temporary name and renamed to
// its final name on Commit, replacing any previous directory there.
type Dir struct {
	Path  string // the temporary directory to write into
	final string
	done  bool
}

// CreateDir makes a new temporary directory beside path.
func CreateDir(path string) (*Dir, error) {
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
