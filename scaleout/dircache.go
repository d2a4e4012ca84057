package scaleout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// DirCache is a qnnpack.Cache in a directory that every shard can reach
// (a shared disk, or one machine's disk for shards run side by side).
// An entry is DIR/v1/<key[:2]>/<key>/: the job's output files under their
// base names and entry.json with their sizes and SHA-256s. An entry is
// built under a temporary name and renamed into place, so concurrent
// writers of one key leave one complete entry and readers never see a
// partial one; Get re-hashes every file and refuses one that changed.
type DirCache struct {
	Dir string
}

// cacheEntry is a cache entry's list of files, stored as entry.json (and as the
// OCI artifact's layers).
type cacheEntry struct {
	Files []cacheFile `json:"files"`
}

// cacheFile is one output of a job.
type cacheFile struct {
	Name   string `json:"name"` // base name
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

const entryName = "entry.json"

var keyRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func checkKey(key string) error {
	if !keyRE.MatchString(key) {
		return fmt.Errorf("cache key %q is not 64 hex digits", key)
	}
	return nil
}

func (c *DirCache) entryDir(key string) string {
	return filepath.Join(c.Dir, "v1", key[:2], key)
}

// Get implements qnnpack.Cache.
func (c *DirCache) Get(ctx context.Context, key string, outputs []string) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	dir := c.entryDir(key)
	b, err := os.ReadFile(filepath.Join(dir, entryName))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e, err := parseEntry(b)
	if err != nil {
		return false, fmt.Errorf("%s: %w", filepath.Join(dir, entryName), err)
	}
	for _, out := range outputs {
		f, ok := e.file(filepath.Base(out))
		if !ok {
			return false, fmt.Errorf("cache entry %s has no %s", dir, filepath.Base(out))
		}
		src, err := os.Open(filepath.Join(dir, f.Name))
		if err != nil {
			return false, err
		}
		err = writeVerified(ctx, out, src, f, dir)
		src.Close()
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// Put implements qnnpack.Cache.
func (c *DirCache) Put(ctx context.Context, key string, outputs []string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	final := c.entryDir(key)
	if _, err := os.Stat(filepath.Join(final, entryName)); err == nil {
		return nil // another shard stored it first
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), "."+key[:8]+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var e cacheEntry
	for _, out := range outputs {
		f, err := copyHashed(ctx, out, filepath.Join(tmp, filepath.Base(out)))
		if err != nil {
			return err
		}
		e.Files = append(e.Files, f)
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, entryName), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(filepath.Join(final, entryName)); serr == nil {
			return nil // a concurrent writer won the rename; its entry is the same
		}
		return fmt.Errorf("store cache entry %s: %w", final, err)
	}
	return nil
}

func parseEntry(b []byte) (*cacheEntry, error) {
	var e cacheEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("cache entry: %w", err)
	}
	if len(e.Files) == 0 {
		return nil, errors.New("cache entry lists no files")
	}
	for _, f := range e.Files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." || f.Name == entryName {
			return nil, fmt.Errorf("cache entry: bad file name %q", f.Name)
		}
		if f.Size < 0 || !keyRE.MatchString(f.SHA256) {
			return nil, fmt.Errorf("cache entry: file %s: bad size or sha256", f.Name)
		}
	}
	return &e, nil
}

func (e *cacheEntry) file(name string) (cacheFile, bool) {
	for _, f := range e.Files {
		if f.Name == name {
			return f, true
		}
	}
	return cacheFile{}, false
}

// copyHashed copies src to dst (a new file) and describes it.
func copyHashed(ctx context.Context, src, dst string) (cacheFile, error) {
	in, err := os.Open(src)
	if err != nil {
		return cacheFile{}, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return cacheFile{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), ctxReader{ctx, in})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cacheFile{}, fmt.Errorf("copy %s: %w", src, err)
	}
	return cacheFile{Name: filepath.Base(src), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// writeVerified writes r to path atomically, refusing content whose size
// or SHA-256 differs from f's (from names where it came from).
func writeVerified(ctx context.Context, path string, r io.Reader, f cacheFile, from string) error {
	out, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer out.Abort()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(ctxReader{ctx, r}, f.Size+1))
	if err != nil {
		return fmt.Errorf("%s: %s: %w", from, f.Name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != f.Size || got != f.SHA256 {
		return fmt.Errorf("%s: %s: %d bytes with SHA-256 %.16s…, the entry says %d bytes with %.16s…; refusing a changed cache entry", from, f.Name, n, got, f.Size, f.SHA256)
	}
	return out.Commit()
}

// ctxReader stops a copy when ctx is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
