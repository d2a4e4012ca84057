package qnnpack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestFindSDK(t *testing.T) {
	root := fakeSDK(t)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	if _, err := FindSDK(""); !errors.Is(err, ErrNoSDK) {
		t.Errorf("no SDK: %v", err)
	}

	s, err := FindSDK(root)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != "2.40.0.251030" || s.VersionSource != "sdk.yaml" || s.ModelDlcLib == "" {
		t.Errorf("%+v", s)
	}
	if s.Converter != filepath.Join(root, "bin/x86_64-linux-clang/qairt-converter") || s.HtpLib != filepath.Join(root, "lib/x86_64-linux-clang/libQnnHtp.so") {
		t.Errorf("paths %+v", s)
	}

	// The flag wins over the environment; QNN_SDK_ROOT over QAIRT_SDK_ROOT.
	other := fakeSDK(t)
	t.Setenv("QAIRT_SDK_ROOT", other)
	if s, err := FindSDK(""); err != nil || s.Root != other {
		t.Errorf("QAIRT_SDK_ROOT: %v %v", s, err)
	}
	t.Setenv("QNN_SDK_ROOT", root)
	if s, err := FindSDK(""); err != nil || s.Root != root {
		t.Errorf("QNN_SDK_ROOT: %v %v", s, err)
	}
	if s, err := FindSDK(other); err != nil || s.Root != other {
		t.Errorf("flag: %v %v", s, err)
	}

	// Without sdk.yaml the directory name gives the version.
	os.Remove(filepath.Join(root, "sdk.yaml"))
	if s, err := FindSDK(root); err != nil || s.Version != "2.40.0.251030" || s.VersionSource != "directory name" {
		t.Errorf("version from name: %+v %v", s, err)
	}
	os.WriteFile(filepath.Join(root, "sdk.yaml"), []byte("name: qairt\nversion: banana\n"), 0o644)
	if _, err := FindSDK(root); err == nil || !strings.Contains(err.Error(), "banana") {
		t.Errorf("bad version: %v", err)
	}
}

// TestFindSDKWindowsLayouts: the x86-64 and ARM64 Windows parts of an SDK
// are found with their .exe tool, .dll libraries (QnnHtp.dll, or
// libQnnHtp.dll where an SDK names it so) and the converter run through
// python; a root with only another layout is refused naming what is
// missing.
func TestFindSDKWindowsLayouts(t *testing.T) {
	for _, h := range []Host{WindowsX64, WindowsARM64} {
		root := fakeSDKFor(t, h)
		s, err := FindSDKFor(root, h)
		if err != nil {
			t.Fatal(err)
		}
		bin, lib := filepath.Join(root, "bin", h.Dir), filepath.Join(root, "lib", h.Dir)
		if s.Host != h.Dir || s.Python != "python" || s.Converter != filepath.Join(bin, "qairt-converter") ||
			s.CtxGen != filepath.Join(bin, "qnn-context-binary-generator.exe") || s.HtpLib != filepath.Join(lib, "QnnHtp.dll") ||
			s.ExtensionsLib != filepath.Join(lib, "QnnHtpNetRunExtensions.dll") || s.ModelDlcLib != filepath.Join(lib, "QnnModelDlc.dll") {
			t.Errorf("%s: %+v", h.Dir, s)
		}
		if prog, args := s.ConverterCommand(); prog != "python" || len(args) != 1 || args[0] != s.Converter {
			t.Errorf("%s: converter runs as %s %v", h.Dir, prog, args)
		}
		os.Rename(filepath.Join(lib, "QnnHtp.dll"), filepath.Join(lib, "libQnnHtp.dll"))
		if s, err := FindSDKFor(root, h); err != nil || s.HtpLib != filepath.Join(lib, "libQnnHtp.dll") {
			t.Errorf("%s with libQnnHtp.dll: %+v %v", h.Dir, s, err)
		}
		if _, err := FindSDKFor(root, LinuxX64); err == nil || !strings.Contains(err.Error(), "x86-64 Linux") || !strings.Contains(err.Error(), "x86_64-linux-clang") {
			t.Errorf("%s root opened for Linux: %v", h.Dir, err)
		}
	}
	linux := fakeSDK(t)
	if _, err := FindSDKFor(linux, WindowsARM64); err == nil || !strings.Contains(err.Error(), "aarch64-windows-msvc/qnn-context-binary-generator.exe") {
		t.Errorf("Linux root opened for ARM64 Windows: %v", err)
	}
	for _, tt := range []struct {
		goos, goarch string
		want         Host
	}{{"linux", "amd64", LinuxX64}, {"windows", "amd64", WindowsX64}, {"windows", "arm64", WindowsARM64}} {
		if h, err := HostFor(tt.goos, tt.goarch); err != nil || h != tt.want {
			t.Errorf("HostFor(%s, %s) = %v, %v", tt.goos, tt.goarch, h, err)
		}
	}
	if _, err := HostFor("darwin", "arm64"); err == nil {
		t.Error("darwin/arm64 has a layout")
	}
}

func TestFindSDKNamesMissingPieces(t *testing.T) {
	root := fakeSDK(t)
	ext := LinuxX64.lib("QnnHtpNetRunExtensions")
	os.Remove(filepath.Join(root, "bin", LinuxX64.Dir, ToolCtxGen))
	os.Remove(filepath.Join(root, "lib", LinuxX64.Dir, ext))
	_, err := FindSDKFor(root, LinuxX64)
	if err == nil {
		t.Fatal("incomplete SDK accepted")
	}
	for _, want := range []string{ToolCtxGen, ext, "missing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
	if _, err := FindSDK(filepath.Join(root, "nope")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("missing root: %v", err)
	}
}

func TestLookupSoC(t *testing.T) {
	for name, want := range map[string][2]any{
		"8elite": {69, "v79"}, "SM8650": {57, "v75"}, "8gen2": {43, "v73"}, "x-elite": {60, "v73"},
		"sm8850": {87, "v81"}, "8elite-gen5": {87, "v81"}, "8 Elite Gen 5": {87, "v81"},
		"soc_model=99,dsp_arch=v83": {99, "v83"},
	} {
		s, err := LookupSoC(name)
		if err != nil || s.Model != want[0] || s.DSPArch != want[1] {
			t.Errorf("%s: %+v %v", name, s, err)
		}
	}
	for name, want := range map[string]string{
		"sm9999":                   "8elite",
		"":                         "no target SoC",
		"qcs8300":                  "--soc-model 82 --dsp-arch",
		"soc_model=0,dsp_arch=v81": "soc_model 0",
	} {
		if _, err := LookupSoC(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want it to contain %q", name, err, want)
		}
	}
	if _, err := CustomSoC(87, "81"); err == nil || !strings.Contains(err.Error(), "v81") {
		t.Errorf("dsp_arch without v: %v", err)
	}
}

// TestSoCTableMatchesReference reads the soc_model/dsp_arch tables of
// qnn-genie.md (a verbatim copy in testdata, checked against
// ../shared/reference when that is present) and requires LookupSoC to
// resolve every row, by part number and by marketing name, to the
// numbers in the table; a row without a dsp_arch must be refused with
// a message asking for it.
func TestSoCTableMatchesReference(t *testing.T) {
	copyText, err := os.ReadFile("testdata/qnn-genie-socs.md")
	if err != nil {
		t.Fatal(err)
	}
	if ref, err := os.ReadFile("../../shared/reference/qnn-genie.md"); err == nil {
		for _, line := range strings.Split(string(copyText), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "|") && !strings.Contains(string(ref), line) {
				t.Errorf("testdata/qnn-genie-socs.md line %q is no longer in ../shared/reference/qnn-genie.md; re-copy the tables", line)
			}
		}
	}
	row := regexp.MustCompile(`^\s*\|\s*([^|]+?)\s*\|\s*([0-9]+)[^|]*\|\s*([^|]+?)\s*\|\s*$`)
	rows := 0
	for _, line := range strings.Split(string(copyText), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows++
		model, _ := strconv.Atoi(m[2])
		arch := m[3]
		// "SM8550 (8 Gen 2)", "8 Gen 2", "X Elite / X Plus", "QCS8300 (added later …)"
		var names []string
		chip, paren, _ := strings.Cut(m[1], " (")
		for _, n := range strings.Split(chip, " / ") {
			names = append(names, n)
		}
		if paren = strings.TrimSuffix(paren, ")"); paren != "" && paren[0] >= '0' && paren[0] <= '9' {
			names = append(names, paren)
		}
		for _, n := range names {
			s, err := LookupSoC(n)
			if !strings.HasPrefix(arch, "v") {
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("--soc-model %d --dsp-arch", model)) {
					t.Errorf("%s (no dsp_arch in the table): %+v, err %v; want an error asking for --dsp-arch", n, s, err)
				}
				continue
			}
			if err != nil || s.Model != model || s.DSPArch != arch {
				t.Errorf("%s: soc_model %d dsp_arch %s, err %v; the table says %d %s", n, s.Model, s.DSPArch, err, model, arch)
			}
		}
	}
	if rows < 22 {
		t.Errorf("parsed %d table rows, want the 4 + 18 of the reference", rows)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b.onnx":                "/a/b.onnx",
		"a b":                      "'a b'",
		"it's":                     `'it'\''s'`,
		"":                         "''",
		"${QNN_SDK_ROOT}/lib/x.so": `"${QNN_SDK_ROOT}"/lib/x.so`,
		"$HOME":                    "'$HOME'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
