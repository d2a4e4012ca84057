package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/scaleout"
	"github.com/qnnprep/qnnprep/shard"
)

var ciCmd = &command{
	Name: "ci",
	Usage: "qnnprep ci github PLAN --model QMODEL --graphs DIR --shards N --cache DIR|oci://HOST/REPO --soc SOC [--runs-on LABEL] [--qnnprep-version V] [-o FILE]\n" +
		"       qnnprep ci kubernetes PLAN --model QMODEL --graphs DIR --shards N --cache DIR|oci://HOST/REPO --soc SOC --image IMAGE --pvc CLAIM [--qnn-sdk DIR] [--name NAME] [-o DIR]",
	Summary: "write the CI files that build a plan's stages as N shards and assemble and pack the bundle: a GitHub Actions workflow, or Kubernetes Jobs",
	Run:     runCI,
}

func runCI(ctx context.Context, c *command, args []string) error {
	if len(args) == 0 {
		return usageError("give an engine: github or kubernetes")
	}
	switch args[0] {
	case "github":
		return ciGitHub(c, args[1:])
	case "kubernetes":
		return ciKubernetes(c, args[1:])
	case "-h", "--help":
		return parseFlags(newFlags(c), args)
	}
	return usageError("unknown engine %q, want github or kubernetes", args[0])
}

// ciFlags are the flags both engines take: what to build and where the
// shards meet.
func ciFlags(fs *pflag.FlagSet) func(plan string) (scaleout.CIOptions, error) {
	model := fs.String("model", "", "the qmodel GGUF, as the jobs see it")
	graphs := fs.String("graphs", "", "the exported graphs directory, as the jobs see it")
	shards := fs.Int("shards", 2, "how many shard jobs split the stages (at most the plan's stage count)")
	cache := fs.String("cache", "", "the cache the shards and the assemble job share: oci://HOST/REPO, or a directory")
	soc := fs.String("soc", "", "target SoC, as for bundle build")
	return func(planPath string) (scaleout.CIOptions, error) {
		var o scaleout.CIOptions
		if *model == "" || *graphs == "" || *cache == "" || *soc == "" {
			return o, usageError("--model, --graphs, --cache and --soc are required")
		}
		if _, err := qnnpack.LookupSoC(*soc); err != nil {
			return o, usageError("--soc: %v", err)
		}
		p, err := shard.ReadPlan(planPath)
		if err != nil {
			return o, err
		}
		return scaleout.CIOptions{Plan: p, PlanPath: planPath, Model: *model, Graphs: *graphs, Shards: *shards, Cache: *cache, SoC: *soc}, nil
	}
}

func ciGitHub(c *command, args []string) error {
	fs := newFlags(c)
	opts := ciFlags(fs)
	runsOn := fs.String("runs-on", "ubuntu-latest", "runner label of every job (the runner needs the QAIRT SDK at $QNN_SDK_ROOT)")
	version := fs.String("qnnprep-version", "latest", "qnnprep version the jobs go install (pin it: every shard must run the same qnnprep)")
	out := fs.StringP("output", "o", ".github/workflows/qnnprep.yml", "workflow file to write")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("ci github takes one plan.json")
	}
	o, err := opts(fs.Arg(0))
	if err != nil {
		return err
	}
	o.RunsOn, o.Version = *runsOn, *version
	b, err := scaleout.GitHubWorkflow(o)
	if err != nil {
		return err
	}
	// .github/workflows may not exist yet in the repository.
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := checkPaths([]string{fs.Arg(0)}, []string{*out}, nil); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(*out, b); err != nil {
		return err
	}
	fmt.Printf("%s: %d shard jobs and an assemble job\n", *out, o.Shards)
	return nil
}

func ciKubernetes(c *command, args []string) error {
	fs := newFlags(c)
	opts := ciFlags(fs)
	image := fs.String("image", "", "container image with qnnprep and the QAIRT SDK")
	pvc := fs.String("pvc", "", "ReadWriteMany persistent volume claim with the inputs, mounted at /work")
	sdk := fs.String("qnn-sdk", "", "QNN_SDK_ROOT inside the image (default: the image's own environment)")
	name := fs.String("name", "qnnprep", "Job name prefix")
	out := fs.StringP("output", "o", ".", "directory for NAME-shards.yaml and NAME-assemble.yaml")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("ci kubernetes takes one plan.json")
	}
	o, err := opts(fs.Arg(0))
	if err != nil {
		return err
	}
	o.Image, o.PVC, o.SDK, o.Name = *image, *pvc, *sdk, *name
	shards, assemble, err := scaleout.KubernetesJobs(o)
	if err != nil {
		return err
	}
	// The output directory may not exist yet (ci github makes its too).
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	files := []string{filepath.Join(*out, *name+"-shards.yaml"), filepath.Join(*out, *name+"-assemble.yaml")}
	if err := checkPaths([]string{fs.Arg(0)}, files, nil); err != nil {
		return err
	}
	for i, b := range [][]byte{shards, assemble} {
		if err := atomicfile.WriteFile(files[i], b); err != nil {
			return err
		}
	}
	fmt.Printf("%s: an Indexed Job of %d shards\n%s: the assemble Job; create it once the first completes:\n  kubectl wait --for=condition=complete job/%s-shards --timeout=24h\n",
		files[0], o.Shards, files[1], *name)
	return nil
}
