package pipeline

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

// fakeSDK builds qnnpack's fake SDK tools into an SDK layout.
func fakeSDK(t *testing.T) *qnnpack.SDK {
	t.Helper()
	root := filepath.Join(t.TempDir(), "qairt", "2.40.0.251030")
	bin, lib := filepath.Join(root, qnnpack.HostBinDir), filepath.Join(root, qnnpack.HostLibDir)
	os.MkdirAll(bin, 0o755)
	os.MkdirAll(lib, 0o755)
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = "/usr/local/go/bin/go"
	}
	tool := filepath.Join(bin, qnnpack.ToolConverter)
	if out, err := exec.Command(gobin, "build", "-o", tool, "../qnnpack/testdata/fakesdk").CombinedOutput(); err != nil {
		t.Fatalf("build fake SDK: %v\n%s", err, out)
	}
	if err := os.Link(tool, filepath.Join(bin, qnnpack.ToolCtxGen)); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{qnnpack.LibHtp, qnnpack.LibHtpExtensions} {
		os.WriteFile(filepath.Join(lib, l), []byte("fake "+l), 0o644)
	}
	sdk, err := qnnpack.FindSDK(root)
	if err != nil {
		t.Fatal(err)
	}
	return sdk
}

// TestOnlyPassingBuildLeavesBundle: with the (fake) SDK, the bundle of a
// passing build verifies; one whose verdict is FAIL, one interrupted in its
// verify step, and one that fails before writing a bundle (over an earlier,
// good one) leave no directory that VerifyBundle accepts.
func TestOnlyPassingBuildLeavesBundle(t *testing.T) {
	src, _ := synthLlama(t)
	sdk := fakeSDK(t)
	tok := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(tok, []byte(`{"model":{"type":"BPE"}}`), 0o644)
	equal := func(e *runtime.Engine, p *shard.Plan) (golden.Decoder, error) { return golden.EngineDecoder(e), nil }
	opts := func(out string, staged StagedFunc) Options {
		o := options(t, src, out, "int8")
		o.DryRun, o.SDK, o.Tokenizer, o.Staged = false, sdk, tok, staged
		return o
	}

	out := filepath.Join(t.TempDir(), "out")
	res, err := Build(context.Background(), opts(out, equal))
	if err != nil || !res.Pass() {
		t.Fatalf("passing build: %v, pass %v", err, res != nil && res.Pass())
	}
	if _, err := qnnpack.VerifyBundle(filepath.Join(out, BundleDir)); err != nil {
		t.Fatalf("bundle of a passing build: %v", err)
	}

	for _, tc := range []struct {
		name string
		run  func(out string) (*Result, error)
		want string
	}{
		{"FAIL verdict", func(out string) (*Result, error) {
			return Build(context.Background(), opts(out, func(e *runtime.Engine, p *shard.Plan) (golden.Decoder, error) {
				return &perturbed{Decoder: golden.EngineDecoder(e)}, nil
			}))
		}, "result FAIL"},
		{"interrupted in verify", func(out string) (*Result, error) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The staged executor is made inside the verify step, after the
			// bundle is written: SIGINT arrives there.
			return Build(ctx, opts(out, func(e *runtime.Engine, p *shard.Plan) (golden.Decoder, error) {
				cancel()
				return golden.EngineDecoder(e), nil
			}))
		}, "context canceled"},
		{"fails before the bundle", func(out string) (*Result, error) {
			if _, err := Build(context.Background(), opts(out, equal)); err != nil {
				return nil, err
			}
			o := opts(out, equal)
			o.Plan.Stages = 5 // 2 layers: plan fails
			return Build(context.Background(), o)
		}, "qnnprep build failed: plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			res, err := tc.run(out)
			if err == nil && res.Pass() {
				t.Fatal("the build passed")
			}
			if tc.name == "interrupted in verify" && !errors.Is(err, context.Canceled) {
				t.Errorf("error %v, want context.Canceled", err)
			}
			bundle := filepath.Join(out, BundleDir)
			if _, serr := os.Stat(filepath.Join(bundle, qnnpack.ManifestName)); serr != nil {
				t.Fatalf("no bundle to check: %v", serr)
			}
			_, verr := qnnpack.VerifyBundle(bundle)
			if verr == nil || !strings.Contains(verr.Error(), "marked incomplete") || !strings.Contains(verr.Error(), tc.want) {
				t.Errorf("VerifyBundle: %v; want it marked incomplete, naming %q", verr, tc.want)
			}
		})
	}
}
