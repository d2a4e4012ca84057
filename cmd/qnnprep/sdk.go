package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/qnnprep/qnnprep/qnnpack"
)

func init() {
	c := &command{
		Name:    "sdk",
		Usage:   "qnnprep sdk [--qnn-sdk DIR] [--json]",
		Summary: "find the QAIRT/QNN SDK (--qnn-sdk, $QNN_SDK_ROOT, $QAIRT_SDK_ROOT) and show its version, tools and target SoCs",
	}
	c.Run = func(ctx context.Context, args []string) error {
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
			b, _ := json.MarshalIndent(struct {
				*qnnpack.SDK
				SoCs []qnnpack.SoC
			}{sdk, qnnpack.SoCs}, "", "  ")
			fmt.Println(string(b))
			return nil
		}
		w := os.Stdout
		fmt.Fprintf(w, "SDK        %s\nversion    %s (from %s)\n", sdk.Root, sdk.Version, sdk.VersionSource)
		fmt.Fprintf(w, "converter  %s\nctx-gen    %s\nbackend    %s\nextensions %s\n", sdk.Converter, sdk.CtxGen, sdk.HtpLib, sdk.ExtensionsLib)
		if sdk.ModelDlcLib != "" {
			fmt.Fprintf(w, "dlc model  %s\n", sdk.ModelDlcLib)
		}
		fmt.Fprintf(w, "\ntarget SoCs (--soc):\n")
		for _, s := range qnnpack.SoCs {
			fmt.Fprintf(w, "  %-7s soc_model %-3d dsp_arch %s  %s %v\n", s.Name, s.Model, s.DSPArch, s.Marketed, s.Aliases)
		}
		return nil
	}
	register(c)
}
