package scaleout

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/qnnpack"
)

// packTime is every entry's modification time: archives of the same
// bundle are byte-identical whenever and wherever they are made.
var packTime = time.Unix(0, 0).UTC()

// zstd settings. The encoder's concurrency is fixed (2 blocks in flight,
// no parallel block sections), so the output does not depend on the
// machine; the decoder's window is bounded, and with it unpack's memory.
const (
	packConcurrency = 2
	maxWindow       = 128 << 20
)

// PackStats says what Pack wrote.
type PackStats struct {
	Files int
	Bytes int64 // the bundle's bytes, before compression
}

// Pack writes the bundle in dir to w as a zstd-compressed tar: manifest.json
// and every file it lists, in sorted path order, as regular files with
// mode 0644, owner 0:0 and a fixed time, so the same bundle always packs to
// the same bytes. Each file is hashed while it is read and must match the
// manifest; a file the manifest does not list, anything but a regular
// file, a dry-run bundle or one marked incomplete fails the pack.
func Pack(ctx context.Context, dir string, w io.Writer) (PackStats, error) {
	var st PackStats
	mp := filepath.Join(dir, qnnpack.ManifestName)
	mb, err := os.ReadFile(mp)
	if err != nil {
		return st, fmt.Errorf("bundle pack: %w", err)
	}
	m, err := qnnpack.ParseManifest(mb, mp)
	if err != nil {
		return st, err
	}
	// Unpack and pull refuse what VerifyBundle refuses; so does pack,
	// rather than write an archive nobody can unpack.
	if m.DryRun {
		return st, fmt.Errorf("bundle pack: %s is a dry-run bundle: the SDK did not run, so the context binaries are missing", dir)
	}
	if m.Incomplete != "" {
		return st, fmt.Errorf("bundle pack: %s is marked incomplete: %s", dir, m.Incomplete)
	}
	if err := checkListed(dir, m); err != nil {
		return st, err
	}
	// Entropy coding of literals even where zstd finds no matches: INT8
	// weights have few repeats but codes far from uniform (about 10% off).
	zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(packConcurrency), zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithAllLitEntropyCompression(true))
	if err != nil {
		return st, err
	}
	defer zw.Close()
	tw := tar.NewWriter(zw)
	files := append([]qnnpack.ManifestFile{{Path: qnnpack.ManifestName, Size: int64(len(mb))}}, m.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		if err := packFile(ctx, tw, dir, f); err != nil {
			return st, err
		}
		st.Files++
		st.Bytes += f.Size
	}
	if err := tw.Close(); err != nil {
		return st, err
	}
	return st, zw.Close()
}

// checkListed refuses a bundle directory holding files its manifest does
// not list, or entries that are not regular files or directories.
func checkListed(dir string, m *qnnpack.Manifest) error {
	listed := map[string]bool{qnnpack.ManifestName: true}
	for _, f := range m.Files {
		listed[f.Path] = true
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() || rel == atomicfile.MarkerName:
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("bundle pack: %s is not a regular file", p)
		case !listed[rel]:
			return fmt.Errorf("bundle pack: %s is not in %s", p, qnnpack.ManifestName)
		}
		return nil
	})
}

func packFile(ctx context.Context, tw *tar.Writer, dir string, f qnnpack.ManifestFile) error {
	p := filepath.Join(dir, filepath.FromSlash(f.Path))
	in, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("bundle pack: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != f.Size {
		return fmt.Errorf("bundle pack: %s is %d bytes, the manifest says %d", p, fi.Size(), f.Size)
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeReg, Name: f.Path, Size: f.Size, Mode: 0o644,
		ModTime: packTime, Uid: 0, Gid: 0,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("bundle pack: %s: %w", f.Path, err)
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(ctxReader{ctx, in}, f.Size)); err != nil {
		return fmt.Errorf("bundle pack: %s: %w", p, err)
	}
	if f.SHA256 != "" && hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("bundle pack: %s changed since the manifest was written (SHA-256 differs)", p)
	}
	return nil
}

// PackFile packs the bundle in dir to the file out, written under a
// temporary name and renamed when complete.
func PackFile(ctx context.Context, dir, out string) (PackStats, error) {
	f, err := atomicfile.Create(out)
	if err != nil {
		return PackStats{}, err
	}
	defer f.Abort()
	st, err := Pack(ctx, dir, f)
	if err != nil {
		return st, err
	}
	return st, f.Commit()
}

// Unpack extracts a packed bundle from r into dir, which is built under a
// temporary name beside it and replaces dir only when the bundle verifies
// against its manifest (qnnpack.VerifyBundle); dir must not hold files
// qnnprep did not write. Only regular files and directories with local
// paths are accepted: an absolute path, "..", a symlink, a hard link, a
// device, a fifo or a repeated name fails the unpack, and nothing is then
// left behind. Memory stays bounded by the zstd window (128 MiB at most)
// whatever the archive holds.
func Unpack(ctx context.Context, r io.Reader, dir string) (*qnnpack.Manifest, error) {
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	d, err := atomicfile.CreateDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Abort()
	if err := extract(ctx, tar.NewReader(zr), d.Path); err != nil {
		return nil, fmt.Errorf("bundle unpack into %s: %w", dir, err)
	}
	m, err := qnnpack.VerifyBundle(d.Path)
	if err != nil {
		return nil, fmt.Errorf("bundle unpack into %s: %w", dir, err)
	}
	return m, d.Commit()
}

// UnpackFile is Unpack reading the archive file in.
func UnpackFile(ctx context.Context, in, dir string) (*qnnpack.Manifest, error) {
	f, err := os.Open(in)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := Unpack(ctx, f, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in, err)
	}
	return m, nil
}

// extract writes the archive's entries under root (a new, empty
// directory this process made), never following or making a link.
func extract(ctx context.Context, tr *tar.Reader, root string) error {
	seen := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if err := checkBundlePath(name); err != nil {
			return fmt.Errorf("archive entry: %w", err)
		}
		if seen[name] {
			return fmt.Errorf("archive entry %q appears twice", name)
		}
		seen[name] = true
		dst := filepath.Join(root, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			continue
		case tar.TypeReg:
		default:
			return fmt.Errorf("archive entry %q is %s; a bundle holds only regular files and directories", name, entryKind(hdr.Typeflag))
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("archive entry %q: %w", name, err)
		}
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("archive entry %q: %w", name, err)
		}
		_, err = io.Copy(out, ctxReader{ctx, tr})
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("archive entry %q: %w", name, err)
		}
	}
}

func entryKind(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "a symlink"
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeChar:
		return "a character device"
	case tar.TypeBlock:
		return "a block device"
	case tar.TypeFifo:
		return "a fifo"
	}
	return fmt.Sprintf("of tar type %q", t)
}
