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
		"ssd_prefix/kv-cache.primary.qnn-htp", "tiny_01_of_02.bin", "tiny_02_of_02.bin"}
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
	cfg := testConfig(4)
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
