package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

// version is set by -ldflags "-X main.version=..." in release builds;
// otherwise it comes from the module build info.
var version = ""

func qnnprepVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v := bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
		return v
	}
	return "(unknown)"
}

var versionCmd = &command{
	Name:    "version",
	Usage:   "qnnprep version",
	Summary: "print the qnnprep version",
	Run:     runVersion,
}

func runVersion(ctx context.Context, c *command, args []string) error {
	if err := parseFlags(newFlags(c), args); err != nil {
		return err
	}
	fmt.Println("qnnprep", qnnprepVersion())
	return nil
}
