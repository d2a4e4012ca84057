package scaleout

import (
	"encoding/json"
	"path/filepath"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// FuzzParseEntry: a cache entry.json either parses into files with
// plain base names, sizes and SHA-256s, or is refused; never a panic.
func FuzzParseEntry(f *testing.F) {
	f.Add([]byte(`{"files":[{"name":"a.bin","size":3,"sha256":"` + key("a") + `"}]}`))
	f.Add([]byte(`{"files":[{"name":"../a","size":3,"sha256":"` + key("a") + `"}]}`))
	f.Add([]byte(`{"files":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := parseEntry(b)
		if err != nil {
			return
		}
		for _, fl := range e.Files {
			if fl.Name != filepath.Base(fl.Name) || fl.Name == ".." || fl.Size < 0 || !keyRE.MatchString(fl.SHA256) {
				t.Fatalf("accepted %+v", fl)
			}
		}
	})
}

// FuzzTitledLayers: layer titles of a fetched OCI manifest are unique and
// every accepted layer has a valid sha256 digest; bundle paths that pass
// checkBundlePath stay inside the bundle.
func FuzzTitledLayers(f *testing.F) {
	f.Add([]byte(`{"layers":[{"mediaType":"application/octet-stream","digest":"sha256:` + key("a") + `","size":1,"annotations":{"org.opencontainers.image.title":"a/b.bin"}}]}`))
	f.Add([]byte(`{"layers":[{"digest":"md5:00","size":-1,"annotations":{"org.opencontainers.image.title":"../x"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m ocispec.Manifest
		if json.Unmarshal(b, &m) != nil {
			return
		}
		files, err := titledLayers(&m)
		if err != nil {
			return
		}
		for name, d := range files {
			if d.Digest.Validate() != nil || d.Size < 0 {
				t.Fatalf("accepted layer %q: %v", name, d)
			}
			if checkBundlePath(name) == nil && !filepath.IsLocal(filepath.FromSlash(name)) {
				t.Fatalf("bundle path %q escapes", name)
			}
		}
	})
}

func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"0/4", "3/4", "4/4", "-1/2", "a/b", "1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err == nil && (sh.Count < 1 || sh.Index < 0 || sh.Index >= sh.Count) {
			t.Fatalf("%q gave %+v", s, sh)
		}
	})
}
