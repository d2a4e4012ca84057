package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Timeout bounds one helper-script or llama-bench run unless the request
// names its own.
var Timeout = 10 * time.Minute

// ErrTimedOut is wrapped by the error of a peer run that was killed at
// its timeout.
var ErrTimedOut = errors.New("timed out")

const resultPrefix = "QNNPREP-RESULT "

// runNode runs js/<script> with req (plus node_modules) as JSON on stdin and
// decodes the reply line into out.
func runNode(what, script string, req map[string]any, out any) error {
	return runNodeFor(Timeout, what, script, req, out)
}

// runNodeFor is runNode with its own timeout (≤ 0: Timeout).
func runNodeFor(timeout time.Duration, what, script string, req map[string]any, out any) error {
	if timeout <= 0 {
		timeout = Timeout
	}
	if err := Check(what); err != nil {
		return err
	}
	src, err := srcDir()
	if err != nil {
		return err
	}
	nm, err := NodeModules()
	if err != nil {
		return err
	}
	req["node_modules"] = nm
	in, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(src, "js", script))
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second // a child still holding the pipes must not block us
	dieWithParent(cmd)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w after %v", ErrTimedOut, timeout)
		}
		return fmt.Errorf("node js/%s: %w%s", script, err, tail(stderr.Bytes()))
	}
	var line []byte
	for _, l := range bytes.Split(stdout.Bytes(), []byte("\n")) {
		if bytes.HasPrefix(l, []byte(resultPrefix)) {
			line = l[len(resultPrefix):]
		}
	}
	if line == nil {
		return fmt.Errorf("node js/%s: no result line in its output%s", script, tail(stderr.Bytes()))
	}
	if err := json.Unmarshal(line, out); err != nil {
		return fmt.Errorf("node js/%s: bad reply: %w", script, err)
	}
	return nil
}

// tail formats the end of a helper's stderr for an error message.
func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	return "\nstderr:\n" + clip(s)
}

// clip keeps the last 2000 bytes of s, where errors are reported.
func clip(s string) string {
	const max = 2000
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return s
}
