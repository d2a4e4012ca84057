package qnnpack

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// ManifestName is the bundle's manifest file.
const ManifestName = "manifest.json"

// ManifestVersion is the manifest format version.
const ManifestVersion = 2

// Manifest describes a bundle: what made it and the SHA-256 of every file.
// Its last field, manifest_sha256, is the SHA-256 of the manifest file
// itself with that field's 64 hex digits replaced by zeros, so a changed
// byte anywhere in the manifest is detected too.
type Manifest struct {
	Version int         `json:"version"`
	Qnnprep string      `json:"qnnprep"`
	SDK     ManifestSDK `json:"sdk"`
	SoC     string      `json:"soc"`
	Plan    string      `json:"plan"` // the plan.json copy in the bundle
	// Recipe is the quantization recipe the weights were made with, as
	// the caller gave it.
	Recipe json.RawMessage `json:"recipe,omitempty"`
	// DryRun marks a bundle written without the SDK: no context binaries.
	DryRun bool `json:"dry_run,omitempty"`
	// Incomplete, when set, says why the bundle is not finished (a build
	// that has not completed, failed or was superseded); VerifyBundle
	// fails such a bundle.
	Incomplete string `json:"incomplete,omitempty"`
	// Container is the width Q1_0/Q2_0 codes were exported in; Stages give
	// each context binary's weight bytes on the device in it and in the
	// qmodel.
	Container string          `json:"container,omitempty"`
	Stages    []ManifestStage `json:"stages,omitempty"`
	// RecurrentState lists graph I/O that Genie does not carry between
	// calls (past_conv/past_ssm): the bundle needs a runtime that feeds
	// each _out back into its _in, as qnnprep's staged runtime does.
	RecurrentState []string       `json:"recurrent_state,omitempty"`
	Notes          []string       `json:"notes,omitempty"`
	Files          []ManifestFile `json:"files"` // sorted by path; every file but the manifest
	Self           string         `json:"manifest_sha256"`
}

// ManifestSDK names the SDK that built the context binaries.
type ManifestSDK struct {
	Version string `json:"version"`
	Source  string `json:"version_source"`
}

// ManifestStage is one stage's context binary and its weight bytes.
type ManifestStage struct {
	Binary      string `json:"binary"` // bundle path of the context binary
	FirstLayer  int    `json:"first_layer"`
	LastLayer   int    `json:"last_layer"`
	DeviceBytes int64  `json:"device_bytes"` // weights as the exported graphs declare them, in Container
	QModelBytes int64  `json:"qmodel_bytes"` // the same weights in the qmodel
}

// ManifestFile is one bundle file.
type ManifestFile struct {
	Path   string `json:"path"` // slash-separated, relative to the bundle
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

const selfKey = `"manifest_sha256": "`

var zeroHash = strings.Repeat("0", 64)

// WriteManifest hashes every file under dir (except the manifest) into m
// and writes dir/manifest.json.
func WriteManifest(dir string, m *Manifest) error {
	files, err := listFiles(dir)
	if err != nil {
		return err
	}
	m.Version = ManifestVersion
	m.Files = m.Files[:0]
	for _, rel := range files {
		if rel == ManifestName {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		h, err := hashFile(p)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, ManifestFile{Path: rel, Size: fi.Size(), SHA256: h})
	}
	return writeManifest(dir, m)
}

// writeManifest writes m as dir/manifest.json with its self hash, as it
// stands (file hashes are not recomputed).
func writeManifest(dir string, m *Manifest) error {
	m.Self = zeroHash
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	sum := sha256.Sum256(b)
	i := bytes.LastIndex(b, []byte(selfKey+zeroHash))
	copy(b[i+len(selfKey):], hex.EncodeToString(sum[:]))
	m.Self = hex.EncodeToString(sum[:])
	return atomicfile.WriteFile(filepath.Join(dir, ManifestName), b)
}

// MarkIncomplete marks the bundle in dir incomplete with reason, so that
// VerifyBundle fails it until MarkComplete: a build marks the bundle it
// is about to replace, and its own bundle until it has passed. A
// directory without a readable manifest is left alone (no bundle there
// verifies anyway).
func MarkIncomplete(dir, reason string) error {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("qnnpack: %w", err)
	}
	m, err := ParseManifest(b, filepath.Join(dir, ManifestName))
	if err != nil {
		return nil
	}
	m.Incomplete = reason
	return writeManifest(dir, m)
}

// MarkComplete clears the bundle's incomplete mark once the build that
// wrote it has passed.
func MarkComplete(dir string) error {
	mp := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(mp)
	if err != nil {
		return fmt.Errorf("qnnpack: %w", err)
	}
	m, err := ParseManifest(b, mp)
	if err != nil {
		return err
	}
	m.Incomplete = ""
	return writeManifest(dir, m)
}

// listFiles returns every regular file under dir but the output marker
// (atomicfile.MarkerName), slash-separated and sorted; anything else
// (symlinks, devices) is an error.
func listFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == atomicfile.MarkerName {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("bundle %s: %s is not a regular file", dir, rel)
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	sort.Strings(files)
	return files, err
}

// ParseManifest decodes a manifest and checks its self hash and fields.
func ParseManifest(b []byte, name string) (*Manifest, error) {
	i := bytes.LastIndex(b, []byte(selfKey))
	if i < 0 || len(b) < i+len(selfKey)+64 {
		return nil, fmt.Errorf("qnnpack: %s: no manifest_sha256 field", name)
	}
	got := string(b[i+len(selfKey) : i+len(selfKey)+64])
	zeroed := bytes.Clone(b)
	copy(zeroed[i+len(selfKey):], zeroHash)
	sum := sha256.Sum256(zeroed)
	if want := hex.EncodeToString(sum[:]); got != want {
		return nil, fmt.Errorf("qnnpack: %s: manifest changed since it was written (manifest_sha256 %.16s…, content hashes to %.16s…)", name, got, want)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("qnnpack: %s: %w", name, err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("qnnpack: %s: manifest version %d, want %d", name, m.Version, ManifestVersion)
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if f.Path == "" || f.Path != path.Clean(f.Path) || path.IsAbs(f.Path) || strings.HasPrefix(f.Path, "../") || f.Path == ".." || f.Path == ManifestName {
			return nil, fmt.Errorf("qnnpack: %s: bad file path %q", name, f.Path)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("qnnpack: %s: file %q listed twice", name, f.Path)
		}
		seen[f.Path] = true
		if len(f.SHA256) != 64 {
			return nil, fmt.Errorf("qnnpack: %s: file %q: sha256 %q is not 64 hex digits", name, f.Path, f.SHA256)
		}
		if _, err := hex.DecodeString(f.SHA256); err != nil {
			return nil, fmt.Errorf("qnnpack: %s: file %q: sha256 %q is not hex", name, f.Path, f.SHA256)
		}
		if f.Size < 0 {
			return nil, fmt.Errorf("qnnpack: %s: file %q: negative size", name, f.Path)
		}
	}
	return &m, nil
}

// VerifyBundle re-checks a bundle against its manifest and says whether it
// is a finished bundle: the manifest's own hash, every listed file's size
// and SHA-256, no missing or extra files, genie_config.json,
// htp_backend_ext_config.json and the plan listed, every file those
// configs name present, a context binary for every stage of the plan, and
// neither a dry run nor marked incomplete. All problems are reported
// together.
func VerifyBundle(dir string) (*Manifest, error) { return verifyBundle(dir, true) }

// VerifyBundleFiles checks all VerifyBundle does but whether the bundle is
// finished: a dry-run bundle (no context binaries) or one its build has
// not yet completed passes when everything else holds. A build checks
// its bundle with it before the verify step that completes it.
func VerifyBundleFiles(dir string) (*Manifest, error) { return verifyBundle(dir, false) }

func verifyBundle(dir string, finished bool) (*Manifest, error) {
	mp := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(mp)
	if err != nil {
		return nil, fmt.Errorf("qnnpack: bundle %s: %w", dir, err)
	}
	m, err := ParseManifest(b, mp)
	if err != nil {
		return nil, err
	}
	files, err := listFiles(dir)
	if err != nil {
		return m, fmt.Errorf("qnnpack: %w", err)
	}
	present := map[string]bool{}
	for _, f := range files {
		present[f] = true
	}
	listed := map[string]bool{}
	for _, f := range m.Files {
		listed[f.Path] = true
	}
	var problems []string
	for _, f := range m.Files {
		if !present[f.Path] {
			problems = append(problems, fmt.Sprintf("%s: missing", f.Path))
			continue
		}
		delete(present, f.Path)
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		fi, err := os.Stat(p)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f.Path, err))
			continue
		}
		if fi.Size() != f.Size {
			problems = append(problems, fmt.Sprintf("%s: %d bytes, manifest says %d", f.Path, fi.Size(), f.Size))
			continue
		}
		h, err := hashFile(p)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f.Path, err))
		} else if h != f.SHA256 {
			problems = append(problems, fmt.Sprintf("%s: SHA-256 %.16s…, manifest says %.16s…", f.Path, h, f.SHA256))
		}
	}
	delete(present, ManifestName)
	for _, f := range sortedKeys(present) {
		problems = append(problems, fmt.Sprintf("%s: not in the manifest", f))
	}
	problems = append(problems, contentProblems(dir, m, listed)...)
	if finished && m.DryRun {
		problems = append(problems, "dry-run bundle: the SDK did not run, so the context binaries are missing")
	}
	if finished && m.Incomplete != "" {
		problems = append(problems, "marked incomplete: "+m.Incomplete)
	}
	if len(problems) > 0 {
		return m, fmt.Errorf("qnnpack: bundle %s does not match its manifest:\n  %s", dir, strings.Join(problems, "\n  "))
	}
	return m, nil
}
