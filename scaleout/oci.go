package scaleout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Artifact types of what qnnprep stores in a registry.
const (
	ArtifactJob    = "application/vnd.qnnprep.job.v1"
	ArtifactBundle = "application/vnd.qnnprep.bundle.v1"
	layerType      = "application/octet-stream"
)

// EnvPlainHTTP set to 1 talks plain HTTP to every registry; loopback
// registries (127.0.0.1, ::1, localhost) always get plain HTTP.
const EnvPlainHTTP = "QNNPREP_OCI_PLAIN_HTTP"

// fixedCreated keeps manifests reproducible: the same files give the same
// manifest digest, so concurrent writers of one key push the same bytes.
const fixedCreated = "1970-01-01T00:00:00Z"

// OCICache is a qnnpack.Cache in an OCI registry: the entry of a job key
// is an artifact tagged with the key (64 hex digits) whose layers are the
// job's output files, each titled with its base name. Blobs are pushed
// first and the tag last, so an interrupted push leaves no entry;
// concurrent writers of one key push identical blobs and an identical
// manifest. Get checks every blob's size and SHA-256 against the manifest.
type OCICache struct {
	repo *remote.Repository
	name string
}

// NewOCICache opens HOST/REPO (no tag). Credentials come from the Docker
// config (docker login, or $DOCKER_CONFIG), as for other OCI tools.
func NewOCICache(ref string) (*OCICache, error) {
	r, err := openRepo(ref)
	if err != nil {
		return nil, err
	}
	if r.Reference.Reference != "" {
		return nil, fmt.Errorf("oci cache %s: name a repository without a tag or digest (the job keys are the tags)", ref)
	}
	return &OCICache{repo: r, name: ref}, nil
}

// openRepo opens a repository reference "HOST/REPO[:TAG]".
func openRepo(ref string) (*remote.Repository, error) {
	ref = strings.TrimPrefix(ref, "oci://")
	parsed, err := registry.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("oci reference %q: %w", ref, err)
	}
	repo, err := remote.NewRepository(parsed.Registry + "/" + parsed.Repository)
	if err != nil {
		return nil, fmt.Errorf("oci reference %q: %w", ref, err)
	}
	repo.Reference.Reference = parsed.Reference
	repo.PlainHTTP = os.Getenv(EnvPlainHTTP) == "1" || isLoopback(parsed.Host())
	client := &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache()}
	client.SetUserAgent("qnnprep")
	if store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{}); err == nil {
		client.Credential = credentials.Credential(store)
	}
	repo.Client = client
	return repo, nil
}

func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Get implements qnnpack.Cache.
func (c *OCICache) Get(ctx context.Context, key string, outputs []string) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	m, err := fetchManifest(ctx, c.repo, key, ArtifactJob)
	if errors.Is(err, errdef.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("oci cache %s:%s: %w", c.name, key, err)
	}
	files, err := titledLayers(m)
	if err != nil {
		return false, fmt.Errorf("oci cache %s:%s: %w", c.name, key, err)
	}
	for _, out := range outputs {
		d, ok := files[filepath.Base(out)]
		if !ok {
			return false, fmt.Errorf("oci cache %s:%s has no %s", c.name, key, filepath.Base(out))
		}
		if err := fetchTo(ctx, c.repo, d, out, c.name+":"+key); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Put implements qnnpack.Cache.
func (c *OCICache) Put(ctx context.Context, key string, outputs []string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	return retryPush(ctx, func() error {
		var layers []ocispec.Descriptor
		for _, out := range outputs {
			d, err := pushFile(ctx, c.repo, out, filepath.Base(out))
			if err != nil {
				return fmt.Errorf("oci cache %s: %w", c.name, err)
			}
			layers = append(layers, d)
		}
		return pushManifest(ctx, c.repo, ArtifactJob, layers, key)
	})
}

// pushAttempts is how often a push is tried. Concurrent writers of one
// key race in the registry (one sees a blob the other is still
// committing, and its manifest is refused as naming an unknown blob);
// pushes are idempotent, so the loser simply pushes again.
const pushAttempts = 4

func retryPush(ctx context.Context, push func() error) error {
	var err error
	for i := range pushAttempts {
		if err = push(); err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(time.Duration(i+1) * 250 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
	return err
}

// pushFile pushes a file as a blob titled title, unless the registry has
// it already.
func pushFile(ctx context.Context, repo *remote.Repository, path, title string) (ocispec.Descriptor, error) {
	f, err := os.Open(path)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, f})
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("read %s: %w", path, err)
	}
	d := ocispec.Descriptor{
		MediaType:   layerType,
		Digest:      digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(h.Sum(nil))),
		Size:        n,
		Annotations: map[string]string{ocispec.AnnotationTitle: title},
	}
	if ok, err := repo.Exists(ctx, d); err == nil && ok {
		return d, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return d, err
	}
	if err := repo.Push(ctx, d, ctxReader{ctx, f}); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return d, fmt.Errorf("push %s: %w", path, err)
	}
	return d, nil
}

// pushManifest pushes the manifest listing layers and tags it, last.
func pushManifest(ctx context.Context, repo *remote.Repository, artifactType string, layers []ocispec.Descriptor, tag string) error {
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_0, artifactType, oras.PackManifestOptions{
		Layers:              layers,
		ManifestAnnotations: map[string]string{ocispec.AnnotationCreated: fixedCreated},
	})
	if err != nil {
		return fmt.Errorf("push manifest %s: %w", tag, err)
	}
	if err := repo.Tag(ctx, desc, tag); err != nil {
		return fmt.Errorf("tag %s: %w", tag, err)
	}
	return nil
}

// maxManifest bounds a fetched manifest (a bundle's has a layer per file).
const maxManifest = 4 << 20

// fetchManifest fetches the manifest tagged ref and checks its type.
func fetchManifest(ctx context.Context, repo *remote.Repository, ref, artifactType string) (*ocispec.Manifest, error) {
	desc, rc, err := repo.FetchReference(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if desc.Size > maxManifest {
		return nil, fmt.Errorf("manifest of %d bytes, over the %d-byte limit", desc.Size, maxManifest)
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxManifest+1))
	if err != nil {
		return nil, err
	}
	if digest.FromBytes(b) != desc.Digest {
		return nil, fmt.Errorf("manifest does not match its digest %s", desc.Digest)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Config.MediaType != artifactType && m.ArtifactType != artifactType {
		return nil, fmt.Errorf("artifact type %q, want %q", m.Config.MediaType, artifactType)
	}
	return &m, nil
}

// titledLayers maps each layer's title to it.
func titledLayers(m *ocispec.Manifest) (map[string]ocispec.Descriptor, error) {
	files := map[string]ocispec.Descriptor{}
	for _, l := range m.Layers {
		t := l.Annotations[ocispec.AnnotationTitle]
		if t == "" {
			return nil, fmt.Errorf("layer %s has no title", l.Digest)
		}
		if _, dup := files[t]; dup {
			return nil, fmt.Errorf("two layers titled %q", t)
		}
		// Validate first: Algorithm panics on a digest without a colon.
		if l.Digest.Validate() != nil || l.Digest.Algorithm() != digest.SHA256 || l.Size < 0 {
			return nil, fmt.Errorf("layer %q: want a sha256 digest and a size", t)
		}
		files[t] = l
	}
	return files, nil
}

// fetchTo writes blob d to path atomically, refusing bytes that do not
// match its digest and size (a blob changed in the registry).
func fetchTo(ctx context.Context, repo *remote.Repository, d ocispec.Descriptor, path, from string) error {
	rc, err := repo.Fetch(ctx, d)
	if err != nil {
		return fmt.Errorf("%s: fetch %s: %w", from, d.Annotations[ocispec.AnnotationTitle], err)
	}
	defer rc.Close()
	f := cacheFile{Name: d.Annotations[ocispec.AnnotationTitle], Size: d.Size, SHA256: d.Digest.Encoded()}
	return writeVerified(ctx, path, rc, f, from)
}
