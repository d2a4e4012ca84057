package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/scaleout"
)

// bundleAssemble writes the bundle from the stages shards stored in the
// cache, running no SDK tool.
func bundleAssemble(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	planPath := fs.String("plan", "", "plan.json the shards built")
	modelPath := fs.String("model", "", "the quantized model (qmodel GGUF) the plan was made from")
	graphs := fs.String("graphs", "", "directory with the exported stage graphs the shards compiled")
	out := fs.String("out", "", "bundle directory to write (replaced atomically)")
	work := fs.String("work", "", "work directory the cached context binaries are fetched into (default OUT.work)")
	soc := addSoCFlags(fs, "")
	sdkDir := fs.String("qnn-sdk", "", "QAIRT/QNN SDK root the shards used (its version is part of every cache key; no tool runs)")
	tok := fs.String("tokenizer", "", "the bundle's tokenizer, as for bundle build")
	convArgs := fs.StringArray("converter-arg", nil, "extra qairt-converter argument the shards were given (part of the cache keys), repeatable")
	cacheSpec := fs.String("cache", "", "the cache the shards wrote: a directory, or oci://HOST/REPO")
	shardCount := fs.Int("shard-count", 0, "how many shards built the stages, so a missing stage is reported with the shard that owns it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	if *cacheSpec == "" {
		return usageError("--cache is required: it holds the stages the shards built")
	}
	in, err := loadBundleInputs(bundleInputs{plan: *planPath, model: *modelPath, graphs: *graphs, out: *out, work: *work, tok: *tok, sdk: *sdkDir, soc: soc})
	if err != nil {
		return err
	}
	cache, err := scaleout.OpenCache(*cacheSpec)
	if err != nil {
		return err
	}
	o := in.options()
	o.ConverterArgs, o.Cache, o.Log = *convArgs, cache, os.Stderr
	res, err := scaleout.Assemble(ctx, o, *shardCount)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d stages assembled from %s (%s)\n", *out, len(in.plan.Stages), *cacheSpec, runCounts(res.Runs))
	return nil
}

func bundlePack(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("bundle pack takes a bundle directory and the .tar.zst to write")
	}
	dir, out := fs.Arg(0), fs.Arg(1)
	if err := checkPaths([]string{dir}, []string{out}, nil); err != nil {
		return err
	}
	start := time.Now()
	st, err := scaleout.PackFile(ctx, dir, out)
	if err != nil {
		return err
	}
	fi, err := os.Stat(out)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	fmt.Printf("%s: %d files, %s packed into %s (%.3f of the size) in %.1fs\n",
		out, st.Files, bytesize.Format(st.Bytes), bytesize.Format(fi.Size()), float64(fi.Size())/float64(max(st.Bytes, 1)), secs)
	return nil
}

func bundleUnpack(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("bundle unpack takes a .tar.zst and the bundle directory to write")
	}
	in, dir := fs.Arg(0), fs.Arg(1)
	if err := checkPaths([]string{in}, nil, []string{dir}); err != nil {
		return err
	}
	m, err := scaleout.UnpackFile(ctx, in, dir)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d files unpacked, manifest verified\n", dir, len(m.Files))
	return nil
}

func bundlePush(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("bundle push takes a bundle directory and HOST/REPO:TAG")
	}
	m, err := scaleout.PushBundle(ctx, fs.Arg(0), fs.Arg(1))
	if err != nil {
		return err
	}
	fmt.Printf("%s: pushed %d files and the manifest\n", fs.Arg(1), len(m.Files))
	return nil
}

func bundlePull(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("bundle pull takes HOST/REPO:TAG and the bundle directory to write")
	}
	dir := fs.Arg(1)
	if err := checkPaths(nil, nil, []string{dir}); err != nil {
		return err
	}
	m, err := scaleout.PullBundle(ctx, fs.Arg(0), dir)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d files pulled, manifest verified\n", dir, len(m.Files))
	return nil
}
