package scaleout

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/qnnpack"
)

// PushBundle verifies the bundle in dir and pushes it to ref
// (HOST/REPO:TAG) as one artifact: a layer per file, titled with its
// bundle path, manifest.json among them. Files a cache entry already
// pushed (the context binaries) are not uploaded again.
func PushBundle(ctx context.Context, dir, ref string) (*qnnpack.Manifest, error) {
	repo, err := openRepo(ref)
	if err != nil {
		return nil, err
	}
	tag := repo.Reference.Reference
	if tag == "" {
		return nil, fmt.Errorf("bundle push %s: give a tag (HOST/REPO:TAG)", ref)
	}
	m, err := qnnpack.VerifyBundle(dir)
	if err != nil {
		return nil, err
	}
	paths := []string{qnnpack.ManifestName}
	for _, f := range m.Files {
		paths = append(paths, f.Path)
	}
	sort.Strings(paths)
	err = retryPush(ctx, func() error {
		var layers []ocispec.Descriptor
		for _, p := range paths {
			d, err := pushFile(ctx, repo, filepath.Join(dir, filepath.FromSlash(p)), p)
			if err != nil {
				return err
			}
			layers = append(layers, d)
		}
		return pushManifest(ctx, repo, ArtifactBundle, layers, tag)
	})
	if err != nil {
		return nil, fmt.Errorf("bundle push %s: %w", ref, err)
	}
	return m, nil
}

// PullBundle fetches the bundle artifact ref into dir (replaced
// atomically; refused when it holds files qnnprep did not write). Every
// blob is checked against its digest, and the bundle against its
// manifest (qnnpack.VerifyBundle), before dir gets its name.
func PullBundle(ctx context.Context, ref, dir string) (*qnnpack.Manifest, error) {
	repo, err := openRepo(ref)
	if err != nil {
		return nil, err
	}
	tag := repo.Reference.Reference
	if tag == "" {
		return nil, fmt.Errorf("bundle pull %s: give a tag or digest (HOST/REPO:TAG)", ref)
	}
	m, err := fetchManifest(ctx, repo, tag, ArtifactBundle)
	if err != nil {
		return nil, fmt.Errorf("bundle pull %s: %w", ref, err)
	}
	files, err := titledLayers(m)
	if err != nil {
		return nil, fmt.Errorf("bundle pull %s: %w", ref, err)
	}
	if _, ok := files[qnnpack.ManifestName]; !ok {
		return nil, fmt.Errorf("bundle pull %s: the artifact has no %s", ref, qnnpack.ManifestName)
	}
	d, err := atomicfile.CreateDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Abort()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := checkBundlePath(name); err != nil {
			return nil, fmt.Errorf("bundle pull %s: %w", ref, err)
		}
		dst := filepath.Join(d.Path, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := fetchTo(ctx, repo, files[name], dst, ref); err != nil {
			return nil, fmt.Errorf("bundle pull: %w", err)
		}
	}
	bm, err := qnnpack.VerifyBundle(d.Path)
	if err != nil {
		return nil, fmt.Errorf("bundle pull %s: %w", ref, err)
	}
	return bm, d.Commit()
}

// checkBundlePath refuses a bundle path that could leave the bundle
// directory or land on qnnprep's own marker.
func checkBundlePath(name string) error {
	if name == "" || name != path.Clean(name) || !filepath.IsLocal(filepath.FromSlash(name)) || path.IsAbs(name) {
		return fmt.Errorf("bad bundle path %q", name)
	}
	if path.Base(name) == atomicfile.MarkerName || atomicfile.IsTemp(path.Base(name)) {
		return fmt.Errorf("bundle path %q is reserved", name)
	}
	return nil
}
