package qnnpack

import (
	"errors"
	"os"
	"path/filepath"
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

func TestFindSDKNamesMissingPieces(t *testing.T) {
	root := fakeSDK(t)
	os.Remove(filepath.Join(root, HostBinDir, ToolCtxGen))
	os.Remove(filepath.Join(root, HostLibDir, LibHtpExtensions))
	_, err := FindSDK(root)
	if err == nil {
		t.Fatal("incomplete SDK accepted")
	}
	for _, want := range []string{ToolCtxGen, LibHtpExtensions, "missing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
	if _, err := FindSDK(filepath.Join(root, "nope")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("missing root: %v", err)
	}
}

func TestLookupSoC(t *testing.T) {
	for name, want := range map[string][2]any{"8elite": {69, "v79"}, "SM8650": {57, "v75"}, "8gen2": {43, "v73"}, "x-elite": {60, "v73"}} {
		s, err := LookupSoC(name)
		if err != nil || s.Model != want[0] || s.DSPArch != want[1] {
			t.Errorf("%s: %+v %v", name, s, err)
		}
	}
	if _, err := LookupSoC("sm9999"); err == nil || !strings.Contains(err.Error(), "8elite") {
		t.Errorf("unknown SoC: %v", err)
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
