package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/testkit/fakesdk"
)

func TestMain(m *testing.M) { os.Exit(fakesdk.Main(m)) }

// fakeSDK is qnnpack's fake SDK, found as a user's would be.
func fakeSDK(t *testing.T) *qnnpack.SDK {
	t.Helper()
	root := fakesdk.Root(t)
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
