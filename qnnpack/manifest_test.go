package qnnpack

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

// TestVerifyBundleDetectsEveryFlippedByte builds an ssd-q1 bundle (so it
// has the forecast-prefix file in a subdirectory too) and flips bytes in
// every file: each flip must be reported, and restoring the byte must make
// the bundle verify again.
func TestVerifyBundleDetectsEveryFlippedByte(t *testing.T) {
	ssd := shard.Dialog{Type: shard.SSD, ForecastTokenCount: 2, Branches: []int{2}, ForecastPrefix: 4, ForecastPrefixName: "ssd_prefix"}
	e := newBuildEnv(t, shard.Options{Dialog: ssd})
	o := e.options()
	m, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifest.Notes) == 0 || !strings.Contains(strings.Join(m.Manifest.Notes, " "), "placeholder") {
		t.Errorf("no placeholder note: %v", m.Manifest.Notes)
	}
	files, err := listFiles(e.out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"genie_config.json", "htp_backend_ext_config.json", "manifest.json", "plan.json",
		"ssd_prefix/kv-cache.primary.qnn-htp", "tiny_01_of_02.bin", "tiny_02_of_02.bin", "tokenizer.json"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Fatalf("bundle files %v, want %v", files, want)
	}
	for _, rel := range files {
		p := filepath.Join(e.out, filepath.FromSlash(rel))
		orig, _ := os.ReadFile(p)
		// Every byte of the manifest (its self hash must catch edits to
		// any field), in memory through ParseManifest, which is what
		// VerifyBundle reads the manifest with; then 33 spread positions of
		// every file on disk through VerifyBundle.
		if rel == ManifestName {
			for i := range orig {
				b := bytes.Clone(orig)
				b[i] ^= 1 << (i % 8)
				if _, err := ParseManifest(b, rel); err == nil {
					t.Fatalf("manifest: flipping bit %d of byte %d (%q) not detected", i%8, i, orig[i])
				}
			}
		}
		var positions []int
		for k := 0; k <= 32; k++ {
			positions = append(positions, k*(len(orig)-1)/32)
		}
		for n, i := range positions {
			b := bytes.Clone(orig)
			b[i] ^= 1 << (n % 8)
			os.WriteFile(p, b, 0o644)
			if _, err := VerifyBundle(e.out); err == nil {
				t.Fatalf("%s: flipping bit %d of byte %d not detected", rel, n%8, i)
			}
		}
		os.WriteFile(p, orig, 0o644)
	}
	if _, err := VerifyBundle(e.out); err != nil {
		t.Fatalf("restored bundle: %v", err)
	}

	// Missing and extra files.
	bin := filepath.Join(e.out, "tiny_02_of_02.bin")
	data, _ := os.ReadFile(bin)
	os.Remove(bin)
	if _, err := VerifyBundle(e.out); err == nil || !strings.Contains(err.Error(), "tiny_02_of_02.bin: missing") {
		t.Errorf("missing file: %v", err)
	}
	os.WriteFile(bin, data, 0o644)
	os.WriteFile(filepath.Join(e.out, "ssd_prefix", "extra"), []byte("x"), 0o644)
	if _, err := VerifyBundle(e.out); err == nil || !strings.Contains(err.Error(), "ssd_prefix/extra: not in the manifest") {
		t.Errorf("extra file: %v", err)
	}
}

func TestForecastPrefixFile(t *testing.T) {
	ssd := shard.Dialog{Type: shard.SSD, ForecastTokenCount: 2, Branches: []int{2}, ForecastPrefix: 4, ForecastPrefixName: "kv"}
	cfg := fakesdk.ModelConfig(4)
	p := testPlan(t, cfg, "m", shard.Options{Dialog: ssd})
	spec, err := ForecastPrefixSpec(p, 8)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WritePlaceholderCache(&buf, spec); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// Header fields at the offsets of Genie's CacheFileSpec.
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != 8 || le.Uint32(b[4:]) != 0xC0DE || b[8] != 0 || le.Uint16(b[10:]) != 2 || le.Uint16(b[12:]) != 16 || le.Uint16(b[14:]) != 4 {
		t.Errorf("header % x", b[:16])
	}
	// keys + values: 4 layers × 2 × (2 heads × 16 dims × 4 positions) bytes, then 8 float64 scales.
	if want := 16 + 4*2*2*16*4 + 8*8; len(b) != want {
		t.Errorf("%d bytes, want %d", len(b), want)
	}
	got, err := ReadCacheSpec(bytes.NewReader(b), int64(len(b)), "x")
	if err != nil || got != spec {
		t.Errorf("read back %+v %v", got, err)
	}
	if _, err := ReadCacheSpec(bytes.NewReader(b), int64(len(b)-1), "x"); err == nil {
		t.Error("short file accepted")
	}

	// A supplied prefix of the wrong shape is refused; the right one is copied.
	e := newBuildEnv(t, shard.Options{Dialog: ssd})
	o := e.options()
	wrong := spec
	wrong.UpdateSize = 5
	var wb bytes.Buffer
	WritePlaceholderCache(&wb, wrong)
	o.ForecastPrefix = filepath.Join(t.TempDir(), "prefix")
	os.WriteFile(o.ForecastPrefix, wb.Bytes(), 0o644)
	if _, err := Build(context.Background(), o); err == nil || !strings.Contains(err.Error(), "5 positions") {
		t.Errorf("wrong prefix: %v", err)
	}
	real := bytes.Clone(b)
	real[100] = 42
	os.WriteFile(o.ForecastPrefix, real, 0o644)
	res, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(e.out, "kv", ForecastPrefixFile)); !bytes.Equal(got, real) {
		t.Error("supplied prefix not copied")
	}
	if strings.Contains(strings.Join(res.Manifest.Notes, " "), "placeholder") {
		t.Errorf("notes %v", res.Manifest.Notes)
	}
}

func FuzzReadCacheSpec(f *testing.F) {
	var buf bytes.Buffer
	WritePlaceholderCache(&buf, CacheSpec{NumTensors: 2, NHeads: 1, EmbedDim: 2, UpdateSize: 3})
	f.Add(buf.Bytes())
	f.Add([]byte("\x02\x00\x00\x00\xde\xc0\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ReadCacheSpec(bytes.NewReader(data), int64(len(data)), "fuzz")
	})
}

func FuzzParseManifest(f *testing.F) {
	dir := f.TempDir()
	os.WriteFile(filepath.Join(dir, "a.bin"), []byte("a"), 0o644)
	if err := WriteManifest(dir, &Manifest{Qnnprep: "x"}); err != nil {
		f.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	f.Add(b)
	f.Add([]byte(`{"manifest_sha256": "` + zeroHash + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseManifest(data, "fuzz")
	})
}

// TestVerifyBundleContents: a bundle whose files all match its manifest
// still fails when what it says it holds is absent: a file genie_config.json
// names, the configs or the plan, a stage's context binary; and when it is
// marked incomplete. Each case edits a built ssd-q1 bundle and rewrites its
// manifest, so only the rule under test can catch it.
func TestVerifyBundleContents(t *testing.T) {
	ssd := shard.Dialog{Type: shard.SSD, ForecastTokenCount: 2, Branches: []int{2}, ForecastPrefix: 4, ForecastPrefixName: "ssd_prefix"}
	e := newBuildEnv(t, shard.Options{Dialog: ssd})
	if _, err := Build(context.Background(), e.options()); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBundle(e.out); err != nil {
		t.Fatalf("built bundle: %v", err)
	}
	rewrite := func(dir string, edit func(m *Manifest)) {
		b, err := os.ReadFile(filepath.Join(dir, ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseManifest(b, ManifestName)
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(m)
		}
		if err := WriteManifest(dir, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		remove []string
		edit   func(m *Manifest)
		want   []string
	}{
		{"only a manifest", []string{"genie_config.json", "htp_backend_ext_config.json", "plan.json", "ssd_prefix/kv-cache.primary.qnn-htp", "tiny_01_of_02.bin", "tiny_02_of_02.bin", "tokenizer.json"},
			func(m *Manifest) { m.Plan = "" }, []string{"genie_config.json: every bundle has one", "the manifest names no plan"}},
		{"tokenizer", []string{"tokenizer.json"}, nil, []string{"genie_config.json names tokenizer.json (path), which is not in the bundle"}},
		{"forecast prefix", []string{"ssd_prefix/kv-cache.primary.qnn-htp"}, nil, []string{"names ssd_prefix/kv-cache.primary.qnn-htp (forecast-prefix-name)"}},
		{"context binary", []string{"tiny_02_of_02.bin"}, nil, []string{"stage 2 of plan.json: its context binary tiny_02_of_02.bin is not in the manifest", "names tiny_02_of_02.bin (ctx-bins)"}},
		{"plan", []string{"plan.json"}, nil, []string{"plan.json: the manifest's plan, but the manifest does not list it"}},
		{"extensions", []string{"htp_backend_ext_config.json"}, nil, []string{"htp_backend_ext_config.json: genie_config.json's backend extensions"}},
		{"incomplete", nil, func(m *Manifest) { m.Incomplete = "build interrupted" }, []string{"marked incomplete: build interrupted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bundle")
			if err := os.CopyFS(dir, os.DirFS(e.out)); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.remove {
				if err := os.Remove(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
					t.Fatal(err)
				}
			}
			rewrite(dir, tc.edit)
			_, err := VerifyBundle(dir)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to contain %q", err, w)
				}
			}
		})
	}

	// MarkIncomplete and MarkComplete change only the mark; VerifyBundleFiles
	// (what a build checks before its verify step) ignores it.
	if err := MarkIncomplete(e.out, "not verified yet"); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBundle(e.out); err == nil || !strings.Contains(err.Error(), "marked incomplete: not verified yet") {
		t.Errorf("marked bundle: %v", err)
	}
	if _, err := VerifyBundleFiles(e.out); err != nil {
		t.Errorf("VerifyBundleFiles of a marked bundle: %v", err)
	}
	if err := MarkComplete(e.out); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBundle(e.out); err != nil {
		t.Errorf("completed bundle: %v", err)
	}
	// A directory without a manifest is no bundle and is left alone.
	empty := t.TempDir()
	if err := MarkIncomplete(empty, "x"); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(empty, ManifestName)); !os.IsNotExist(err) {
		t.Error("MarkIncomplete wrote a manifest into a directory without one")
	}
}
