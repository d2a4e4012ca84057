package qnnpack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Host paths inside a QAIRT/QNN SDK for an x86-64 Linux build machine.
const (
	HostBinDir = "bin/x86_64-linux-clang"
	HostLibDir = "lib/x86_64-linux-clang"

	ToolConverter = "qairt-converter"
	ToolCtxGen    = "qnn-context-binary-generator"

	LibHtp           = "libQnnHtp.so"
	LibHtpExtensions = "libQnnHtpNetRunExtensions.so"
	// LibModelDlc lets qnn-context-binary-generator load DLCs through
	// --model on SDKs that need it; newer ones take --dlc_path alone.
	LibModelDlc = "libQnnModelDlc.so"
)

// Environment variables naming the SDK root, in the order they are tried.
var SDKEnv = []string{"QNN_SDK_ROOT", "QAIRT_SDK_ROOT"}

// SDK is a located QAIRT/QNN SDK: its root, version and the host tools and
// libraries a build uses.
type SDK struct {
	Root          string
	Version       string // e.g. "2.40.0.251030"
	VersionSource string // where Version came from: "sdk.yaml" or "directory name"

	Converter     string // bin/x86_64-linux-clang/qairt-converter
	CtxGen        string // bin/x86_64-linux-clang/qnn-context-binary-generator
	HtpLib        string // lib/x86_64-linux-clang/libQnnHtp.so
	ExtensionsLib string // lib/x86_64-linux-clang/libQnnHtpNetRunExtensions.so
	ModelDlcLib   string // lib/x86_64-linux-clang/libQnnModelDlc.so, "" if the SDK has none
}

// ErrNoSDK is returned by FindSDK when neither the flag nor the
// environment names an SDK.
var ErrNoSDK = errors.New("no QAIRT/QNN SDK given: pass --qnn-sdk DIR or set QNN_SDK_ROOT (or QAIRT_SDK_ROOT)")

// FindSDK locates the SDK: dir if non-empty, else $QNN_SDK_ROOT, else
// $QAIRT_SDK_ROOT. It checks that every host tool and library a build needs
// is there and reads the version; errors name each missing path.
func FindSDK(dir string) (*SDK, error) {
	from := "--qnn-sdk"
	if dir == "" {
		for _, env := range SDKEnv {
			if v := os.Getenv(env); v != "" {
				dir, from = v, "$"+env
				break
			}
		}
	}
	if dir == "" {
		return nil, ErrNoSDK
	}
	return OpenSDK(dir, from)
}

// OpenSDK checks the SDK at root; from says where root came from, for
// error messages.
func OpenSDK(root, from string) (*SDK, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("qnnpack: SDK %s (%s): %w", root, from, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("qnnpack: SDK root %s (from %s) is not a directory", root, from)
	}
	s := &SDK{
		Root:          abs,
		Converter:     filepath.Join(abs, HostBinDir, ToolConverter),
		CtxGen:        filepath.Join(abs, HostBinDir, ToolCtxGen),
		HtpLib:        filepath.Join(abs, HostLibDir, LibHtp),
		ExtensionsLib: filepath.Join(abs, HostLibDir, LibHtpExtensions),
	}
	var missing []string
	for _, p := range []string{s.Converter, s.CtxGen} {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, p+" (executable)")
		}
	}
	for _, p := range []string{s.HtpLib, s.ExtensionsLib} {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("qnnpack: SDK %s (from %s) is incomplete for an x86-64 Linux host; missing:\n  %s",
			abs, from, strings.Join(missing, "\n  "))
	}
	if p := filepath.Join(abs, HostLibDir, LibModelDlc); fileExists(p) {
		s.ModelDlcLib = p
	}
	s.Version, s.VersionSource, err = sdkVersion(abs)
	if err != nil {
		return nil, fmt.Errorf("qnnpack: SDK %s (from %s): %w", abs, from, err)
	}
	return s, nil
}

// versionRE matches QAIRT release numbers such as 2.40.0.251030.
var versionRE = regexp.MustCompile(`^v?(\d+\.\d+\.\d+(\.\d+)?)$`)

// sdkVersion reads the version from the root's sdk.yaml ("version: X", a
// flat key: value file in every QAIRT release; onnxruntime's QNN build and
// CI read it the same way), falling back to the root directory's name,
// which the SDK zip uses (qairt/2.40.0.251030).
func sdkVersion(root string) (version, source string, err error) {
	path := filepath.Join(root, "sdk.yaml")
	b, err := os.ReadFile(path)
	if err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok || strings.TrimSpace(k) != "version" || strings.HasPrefix(k, " ") {
				continue
			}
			v = strings.Trim(strings.TrimSpace(v), `"'`)
			if !versionRE.MatchString(v) {
				return "", "", fmt.Errorf("%s: version %q is not a QAIRT release number like 2.40.0.251030", path, v)
			}
			return strings.TrimPrefix(v, "v"), "sdk.yaml", nil
		}
		return "", "", fmt.Errorf("%s has no top-level \"version:\" line", path)
	}
	if m := versionRE.FindStringSubmatch(filepath.Base(root)); m != nil {
		return m[1], "directory name", nil
	}
	return "", "", fmt.Errorf("cannot tell the SDK version: no sdk.yaml in %s and the directory name is not a version", root)
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// DryRunSDK stands in for an SDK that is not installed: paths are written
// under ${QNN_SDK_ROOT} so that printed commands run once the variable is
// set. It includes --model libQnnModelDlc.so, which every SDK accepts.
func DryRunSDK() *SDK {
	root := "${QNN_SDK_ROOT}"
	return &SDK{
		Root:          root,
		Version:       "unknown",
		VersionSource: "none (dry run)",
		Converter:     root + "/" + HostBinDir + "/" + ToolConverter,
		CtxGen:        root + "/" + HostBinDir + "/" + ToolCtxGen,
		HtpLib:        root + "/" + HostLibDir + "/" + LibHtp,
		ExtensionsLib: root + "/" + HostLibDir + "/" + LibHtpExtensions,
		ModelDlcLib:   root + "/" + HostLibDir + "/" + LibModelDlc,
	}
}
