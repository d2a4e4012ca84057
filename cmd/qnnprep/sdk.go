package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/qnnprep/qnnprep/qnnpack"
)

var sdkCmd = &command{
	Name:    "sdk",
	Usage:   "qnnprep sdk [--qnn-sdk DIR] [--json]",
	Summary: "find the QAIRT/QNN SDK (--qnn-sdk, $QNN_SDK_ROOT, $QAIRT_SDK_ROOT) and show its version, tools and target SoCs",
	Run:     runSDK,
}

func runSDK(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	dir := fs.String("qnn-sdk", "", "SDK root (default $QNN_SDK_ROOT, then $QAIRT_SDK_ROOT)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("no positional arguments expected")
	}
	sdk, err := qnnpack.FindSDK(*dir)
	if err != nil {
		return err
	}
	if *asJSON {
		printJSON(struct {
			*qnnpack.SDK
			SoCs []qnnpack.SoC
		}{sdk, qnnpack.SoCs})
		return nil
	}
	w := os.Stdout
	fmt.Fprintf(w, "SDK        %s\nversion    %s (from %s)\nhost       %s\n", sdk.Root, sdk.Version, sdk.VersionSource, sdk.Host)
	conv := sdk.Converter
	if sdk.Python != "" {
		conv = sdk.Python + " " + conv
	}
	fmt.Fprintf(w, "converter  %s\nctx-gen    %s\nbackend    %s\nextensions %s\n", conv, sdk.CtxGen, sdk.HtpLib, sdk.ExtensionsLib)
	if sdk.ModelDlcLib != "" {
		fmt.Fprintf(w, "dlc model  %s\n", sdk.ModelDlcLib)
	}
	fmt.Fprintf(w, "\ntarget SoCs (--soc; others: --soc-model N --dsp-arch vNN):\n")
	for _, s := range qnnpack.SoCs {
		arch := s.DSPArch
		if arch == "" {
			arch = "?"
		}
		fmt.Fprintf(w, "  %-11s soc_model %-3d dsp_arch %-4s %s %v\n", s.Name, s.Model, arch, s.Marketed, s.Aliases)
	}
	return nil
}

// addSoCFlags adds --soc (default def), --soc-model and --dsp-arch to fs.
// The function it returns, called after parsing, gives the SoC name
// qnnpack resolves: a table name, or a custom chip's from its two numbers.
func addSoCFlags(fs *pflag.FlagSet, def string) func() (string, error) {
	soc := fs.String("soc", def, "target SoC by name or part number, e.g. 8elite, sm8750, 8elite-gen5, sm8850, xelite ('qnnprep sdk' lists them)")
	model := fs.Int("soc-model", 0, "target SoC by its QNN soc_model number, for a chip --soc does not know (with --dsp-arch)")
	arch := fs.String("dsp-arch", "", "the HTP architecture of --soc-model's chip, e.g. v81")
	return func() (string, error) {
		custom := fs.Changed("soc-model") || fs.Changed("dsp-arch")
		switch {
		case custom && fs.Changed("soc"):
			return "", usageError("give --soc or --soc-model with --dsp-arch, not both")
		case custom && (!fs.Changed("soc-model") || !fs.Changed("dsp-arch")):
			return "", usageError("--soc-model and --dsp-arch go together")
		case custom:
			s, err := qnnpack.CustomSoC(*model, *arch)
			if err != nil {
				return "", usageError("%v", err)
			}
			return s.Name, nil
		case *soc == "":
			return "", usageError("--soc (or --soc-model with --dsp-arch) is required")
		}
		if _, err := qnnpack.LookupSoC(*soc); err != nil {
			return "", usageError("--soc: %v", err)
		}
		return *soc, nil
	}
}
