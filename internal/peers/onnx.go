package peers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ortRelPath is where onnxruntime-node 1.30.0 keeps its runtime library
// (reference/peers.md §1.3); github.com/yalue/onnxruntime_go v1.27.0 loads it.
const ortRelPath = "onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1"

// ORTLibrary returns the path of the ONNX Runtime 1.30.0 shared library
// bundled with onnxruntime-node, for onnxruntime_go.SetSharedLibraryPath.
func ORTLibrary() (string, error) {
	if err := Check(ONNXRuntimeNode); err != nil {
		return "", err
	}
	nm, err := NodeModules()
	if err != nil {
		return "", err
	}
	p, err := filepath.Abs(filepath.Join(nm, ortRelPath))
	if err != nil {
		return "", err
	}
	return p, nil
}

// ONNXCheck runs onnx.checker.check_model(path, full_check=True) from
// Debian's python3-onnx (onnx 1.12: IR ≤ 8, opset ≤ 17). It passes the path,
// so models with external data over 2 GiB are checked as well.
func ONNXCheck(path string) error {
	if err := Check(PythonONNX); err != nil {
		return err
	}
	src, err := srcDir()
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("peers: onnx checker: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Python, filepath.Join(src, "python", "onnx_check.py"), abs)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dieWithParent(cmd)
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); ok && ctx.Err() == nil && cmd.ProcessState.ExitCode() == 1 {
			return fmt.Errorf("peers: onnx checker rejects %s: %s", path, clip(strings.TrimSpace(stderr.String())))
		}
		return fmt.Errorf("peers: onnx checker on %s: %w%s", path, err, tail(stderr.Bytes()))
	}
	return nil
}
