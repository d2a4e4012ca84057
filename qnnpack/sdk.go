package qnnpack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// The SDK tools a build runs, under bin/ in the host's folder (Host).
const (
	ToolConverter = "qairt-converter"
	ToolCtxGen    = "qnn-context-binary-generator"
)

// Host is a build machine's part of the SDK: the folder under bin/ and
// lib/ holding its tools and libraries, and how they are named there.
// On Windows (qnn-genie.md, appendix) native tools end in .exe, libraries
// are QnnHtp.dll (some SDKs say libQnnHtp.dll, so the name is looked up),
// and qairt-converter is a Python entry point run through python.
type Host struct {
	Dir     string // e.g. "x86_64-windows-msvc"
	Desc    string // e.g. "x86-64 Windows"
	Windows bool
}

// The build-machine layouts qnnprep knows.
var (
	LinuxX64     = Host{Dir: "x86_64-linux-clang", Desc: "x86-64 Linux"}
	WindowsX64   = Host{Dir: "x86_64-windows-msvc", Desc: "x86-64 Windows", Windows: true}
	WindowsARM64 = Host{Dir: "aarch64-windows-msvc", Desc: "ARM64 Windows", Windows: true}
	Hosts        = []Host{LinuxX64, WindowsX64, WindowsARM64}
)

// HostFor returns the layout for a GOOS/GOARCH pair.
func HostFor(goos, goarch string) (Host, error) {
	switch {
	case goos == "linux" && goarch == "amd64":
		return LinuxX64, nil
	case goos == "windows" && goarch == "amd64":
		return WindowsX64, nil
	case goos == "windows" && goarch == "arm64":
		return WindowsARM64, nil
	}
	return Host{}, fmt.Errorf("qnnpack: the QAIRT SDK has no host tools qnnprep knows for %s/%s (it knows x86-64 Linux, x86-64 and ARM64 Windows)", goos, goarch)
}

// currentHost is this machine's layout; other machines get the Linux one
// for dry runs and an error from FindSDK.
func currentHost() (Host, error) { return HostFor(runtime.GOOS, runtime.GOARCH) }

// tool is a native tool's file name on h.
func (h Host) tool(name string) string {
	if h.Windows {
		return name + ".exe"
	}
	return name
}

// lib is a library's file name on h: "QnnHtp" → libQnnHtp.so or
// QnnHtp.dll.
func (h Host) lib(stem string) string {
	if h.Windows {
		return stem + ".dll"
	}
	return "lib" + stem + ".so"
}

// findLib is lib, or on Windows libSTEM.dll when only that exists in dir.
func (h Host) findLib(dir, stem string) string {
	p := filepath.Join(dir, h.lib(stem))
	if alt := filepath.Join(dir, "lib"+stem+".dll"); h.Windows && !fileExists(p) && fileExists(alt) {
		return alt
	}
	return p
}

// Environment variables naming the SDK root, in the order they are tried.
var SDKEnv = []string{"QNN_SDK_ROOT", "QAIRT_SDK_ROOT"}

// SDK is a located QAIRT/QNN SDK: its root, version and the host tools and
// libraries a build uses.
type SDK struct {
	Root          string
	Version       string // e.g. "2.40.0.251030"
	VersionSource string // where Version came from: "sdk.yaml" or "directory name"
	Host          string // the layout used, e.g. "x86_64-linux-clang"

	// Python runs Converter when it is a Python entry point (Windows);
	// "" when Converter is executable itself.
	Python        string
	Converter     string // bin/HOST/qairt-converter
	CtxGen        string // bin/HOST/qnn-context-binary-generator[.exe]
	HtpLib        string // lib/HOST/libQnnHtp.so or QnnHtp.dll
	ExtensionsLib string // lib/HOST/libQnnHtpNetRunExtensions.so or QnnHtpNetRunExtensions.dll
	ModelDlcLib   string // lib/HOST/libQnnModelDlc.so or QnnModelDlc.dll, "" if the SDK has none
}

// ConverterCommand is the program and leading arguments that run
// qairt-converter.
func (s *SDK) ConverterCommand() (string, []string) {
	if s.Python != "" {
		return s.Python, []string{s.Converter}
	}
	return s.Converter, nil
}

// ErrNoSDK is returned by FindSDK when neither the flag nor the
// environment names an SDK.
var ErrNoSDK = errors.New("no QAIRT/QNN SDK given: pass --qnn-sdk DIR or set QNN_SDK_ROOT (or QAIRT_SDK_ROOT)")

// FindSDK locates the SDK: dir if non-empty, else $QNN_SDK_ROOT, else
// $QAIRT_SDK_ROOT. It checks that every host tool and library a build needs
// for this machine's layout is there and reads the version; errors name
// each missing path.
func FindSDK(dir string) (*SDK, error) {
	h, err := currentHost()
	if err != nil {
		return nil, err
	}
	return FindSDKFor(dir, h)
}

// FindSDKFor is FindSDK for the layout of host h.
func FindSDKFor(dir string, h Host) (*SDK, error) {
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
	return OpenSDK(dir, from, h)
}

// OpenSDK checks the SDK at root for host h; from says where root came
// from, for error messages.
func OpenSDK(root, from string, h Host) (*SDK, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("qnnpack: SDK %s (%s): %w", root, from, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("qnnpack: SDK root %s (from %s) is not a directory", root, from)
	}
	bin, lib := filepath.Join(abs, "bin", h.Dir), filepath.Join(abs, "lib", h.Dir)
	s := &SDK{
		Root:          abs,
		Host:          h.Dir,
		Converter:     filepath.Join(bin, ToolConverter),
		CtxGen:        filepath.Join(bin, h.tool(ToolCtxGen)),
		HtpLib:        h.findLib(lib, "QnnHtp"),
		ExtensionsLib: h.findLib(lib, "QnnHtpNetRunExtensions"),
	}
	var missing []string
	exes := []string{s.Converter, s.CtxGen}
	if h.Windows {
		// Windows has no executable bit; the converter is a script.
		s.Python = "python"
		exes = nil
		for _, p := range []string{s.Converter, s.CtxGen} {
			if !fileExists(p) {
				missing = append(missing, p)
			}
		}
	}
	for _, p := range exes {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, p+" (executable)")
		}
	}
	for _, p := range []string{s.HtpLib, s.ExtensionsLib} {
		if !fileExists(p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("qnnpack: SDK %s (from %s) is incomplete for an %s host; missing:\n  %s",
			abs, from, h.Desc, strings.Join(missing, "\n  "))
	}
	if p := h.findLib(lib, "QnnModelDlc"); fileExists(p) {
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

// DryRunSDK stands in for an SDK that is not installed, for this
// machine's layout (x86-64 Linux on machines the SDK has no tools for).
func DryRunSDK() *SDK {
	h, err := currentHost()
	if err != nil {
		h = LinuxX64
	}
	return DryRunSDKFor(h)
}

// DryRunSDKFor stands in for an SDK with host h's layout: paths are
// written under ${QNN_SDK_ROOT} so that printed commands run once the
// variable is set. It includes --model with the DLC model library, which
// every SDK accepts.
func DryRunSDKFor(h Host) *SDK {
	root := "${QNN_SDK_ROOT}"
	bin, lib := root+"/bin/"+h.Dir+"/", root+"/lib/"+h.Dir+"/"
	s := &SDK{
		Root:          root,
		Version:       "unknown",
		VersionSource: "none (dry run)",
		Host:          h.Dir,
		Converter:     bin + ToolConverter,
		CtxGen:        bin + h.tool(ToolCtxGen),
		HtpLib:        lib + h.lib("QnnHtp"),
		ExtensionsLib: lib + h.lib("QnnHtpNetRunExtensions"),
		ModelDlcLib:   lib + h.lib("QnnModelDlc"),
	}
	if h.Windows {
		s.Python = "python"
	}
	return s
}
