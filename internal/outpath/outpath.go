// Package outpath decides, before a command does any work, whether it may
// write its outputs: never over something that is not a regular file, nor
// over a file qnnprep did not write (atomicfile.CheckFile),
// never onto one of its own inputs or into an input directory (however the
// path is spelled: "..", symlinks, hard links), never into a directory
// holding files qnnprep did not write, and never where the write would
// fail only at the end (a missing or read-only directory).
//
// Every command lists its inputs and outputs once in a Paths and calls
// Check first; atomicfile then enforces the same rules again at the moment
// of the final rename.
package outpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// Paths are what one command reads and writes. Empty strings are ignored,
// so optional flags can be listed as they are.
type Paths struct {
	Inputs []string // files or directories the command reads
	Files  []string // files it writes (each replaced whole)
	Dirs   []string // directories it writes or replaces (atomicfile.CheckOwned)
}

// Check returns an error naming the output and, where one is involved,
// the input, for the first output the command must not write.
func Check(p Paths) error {
	var ins []input
	for _, in := range p.Inputs {
		if in == "" || in == "-" {
			continue
		}
		r, err := filepath.EvalSymlinks(in)
		if err != nil {
			continue // missing inputs are the command's own error to report
		}
		fi, err := os.Stat(r)
		if err != nil {
			continue
		}
		abs, err := filepath.Abs(r)
		if err != nil {
			return err
		}
		ins = append(ins, input{in, abs, fi})
	}
	type output struct{ path, real string }
	var outs []output
	add := func(out, real string) error {
		for _, o := range outs {
			if o.real == real {
				return fmt.Errorf("%s and %s are the same output", o.path, out)
			}
		}
		outs = append(outs, output{out, real})
		return nil
	}
	for _, out := range p.Files {
		if out == "" {
			continue
		}
		real, err := checkFile(out, ins)
		if err != nil {
			return err
		}
		if err := add(out, real); err != nil {
			return err
		}
	}
	for _, out := range p.Dirs {
		if out == "" {
			continue
		}
		real, err := checkDir(out, ins)
		if err != nil {
			return err
		}
		if err := add(out, real); err != nil {
			return err
		}
	}
	return nil
}

type input struct {
	path string // as given
	real string // absolute, symlinks followed
	fi   fs.FileInfo
}

// checkFile applies the rules for an output file and returns its resolved
// path.
func checkFile(out string, ins []input) (string, error) {
	dir, _ := filepath.Split(out)
	if dir == "" {
		dir = "."
	}
	if err := writableDir(out, dir); err != nil {
		return "", err
	}
	real, err := resolve(out)
	if err != nil {
		return "", err
	}
	outFI, statErr := os.Stat(out)
	for _, in := range ins {
		switch {
		case real == in.real || (statErr == nil && os.SameFile(outFI, in.fi)):
			return "", fmt.Errorf("output %s is the input %s; refusing to overwrite it", out, in.path)
		case in.fi.IsDir() && within(real, in.real):
			return "", fmt.Errorf("output %s is inside the input directory %s; write it elsewhere", out, in.path)
		case in.fi.IsDir() && statErr == nil:
			if twin := sameFileIn(in.real, outFI); twin != "" {
				return "", fmt.Errorf("output %s is a hard link to %s in the input directory %s; refusing to overwrite it", out, twin, in.path)
			}
		}
	}
	// Last, so that an output which is an input says so.
	if err := atomicfile.CheckFile(out); err != nil {
		return "", err
	}
	return real, nil
}

// checkDir applies the rules for an output directory and returns its
// resolved path.
func checkDir(out string, ins []input) (string, error) {
	// The nearest existing ancestor is where the directory will be made.
	parent := filepath.Clean(out)
	for {
		if _, err := os.Lstat(parent); err == nil {
			break
		}
		next := filepath.Dir(parent)
		if next == parent {
			break
		}
		parent = next
	}
	if fi, err := os.Stat(parent); err == nil && fi.IsDir() && parent != filepath.Clean(out) {
		if err := writableDir(out, parent); err != nil {
			return "", err
		}
	} else if err == nil && !fi.IsDir() {
		return "", fmt.Errorf("cannot write %s: %s is not a directory", out, parent)
	}
	real, err := resolve(out)
	if err != nil {
		return "", err
	}
	for _, in := range ins {
		switch {
		case real == in.real:
			return "", fmt.Errorf("output directory %s is the input %s; refusing to replace it", out, in.path)
		case in.fi.IsDir() && within(real, in.real):
			return "", fmt.Errorf("output directory %s is inside the input directory %s; write it elsewhere", out, in.path)
		case within(in.real, real):
			return "", fmt.Errorf("input %s is inside the output directory %s; write the output elsewhere", in.path, out)
		}
	}
	if err := atomicfile.CheckOwned(out); err != nil {
		return "", err
	}
	return real, nil
}

// writableDir proves that files can be created in dir by creating one,
// so a missing, read-only or non-directory parent fails before the work.
func writableDir(out, dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot write %s: directory %s does not exist", out, dir)
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", out, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("cannot write %s: %s is not a directory", out, dir)
	}
	// The name looks like an atomicfile temporary, so an interrupted probe
	// never makes a directory look like the user's.
	f, err := os.CreateTemp(dir, ".write-probe.tmp-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: directory %s is not writable: %w", out, dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// resolve returns p absolute with every symlink followed; for a path that
// does not exist yet, its directory is resolved and its name appended.
// ".." is taken after the symlink before it, as the kernel does.
func resolve(p string) (string, error) {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return filepath.Abs(r)
	}
	dir, base := filepath.Split(p)
	if dir == "" {
		dir = "."
	}
	if base == "" || base == "." || base == ".." {
		return filepath.Abs(p)
	}
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		r, err = resolve(strings.TrimSuffix(dir, string(filepath.Separator)))
		if err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(r)
	if err != nil {
		return "", err
	}
	return filepath.Join(abs, base), nil
}

// within reports whether path lies strictly inside dir (both resolved).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// maxWalk bounds the entries sameFileIn looks at: input directories are
// model checkpoints and export directories, not file systems.
const maxWalk = 100000

// sameFileIn returns a file under dir that is fi (a hard link), or "".
func sameFileIn(dir string, fi fs.FileInfo) string {
	var twin string
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if n++; n > maxWalk {
			return filepath.SkipAll
		}
		if err != nil || twin != "" || !d.Type().IsRegular() {
			return nil
		}
		if i, err := d.Info(); err == nil && os.SameFile(i, fi) {
			twin = p
			return filepath.SkipAll
		}
		return nil
	})
	return twin
}

// SameFile reports whether paths a and b name one existing file, however
// they are spelled (links, ".."): how a command sees that two of its
// inputs are one, e.g. a draft model that is the target itself.
func SameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
